"""CreatePartitions (key 37), v0-3.

Forwarded to the controller (create_partitions): a higher count adds partitions (with the given
replica assignments, one list of broker ids per new partition, or placed by the controller); a
lower count is KIP-253's marking for deletion (see minibroker.controller.partition_count).
validate_only checks without changing anything. A topic given twice is answered once with
INVALID_REQUEST ("Duplicate topic name."). After the controller committed, we wait until this
broker's metadata cache shows the new count with a leader for every partition, bounded by
timeout_ms (<= 0: no wait); a topic not there by then is answered with REQUEST_TIMED_OUT.
v1: throttle_time_ms (unchanged shape).  v2: flexible.  v3: same as v2.
"""
from __future__ import annotations

from kafka.errors import InvalidRequestError, RequestTimedOutError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from minibroker.broker.dispatch import RequestContext, handles
from minibroker.broker.metadata_wait import wait_for_metadata

_Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def _visible(ctx: RequestContext, name: str, count: int) -> bool:
    t = ctx.broker.metadata.topics.get(name)
    return (t is not None and t.undeleted_partition_count == count
            and all(t.partitions.get(p) is not None and t.partitions[p].leader >= 0
                    for p in range(count)))


@handles(ApiKey.CreatePartitions, CreatePartitionsRequest, versions=(0, 3))
async def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest):
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    results: list[_Result] = []
    answered: set[str] = set()
    changed = []
    for t in req.topics:
        if counts[t.name] > 1:
            if t.name not in answered:
                answered.add(t.name)
                results.append(_Result(name=t.name, error_code=InvalidRequestError.errno,
                                       error_message="Duplicate topic name."))
            continue
        assignments = (None if t.assignments is None
                       else [list(a.broker_ids) for a in t.assignments])
        res = await ctx.broker.controller.create_partitions(t.name, t.count, assignments,
                                                            req.validate_only)
        results.append(_Result(name=t.name, error_code=res.error_code, error_message=res.message))
        if res.error_code == 0 and not req.validate_only:
            changed.append((len(results) - 1, t.name, t.count))
    if changed and req.timeout_ms > 0:
        await wait_for_metadata(ctx, lambda: all(_visible(ctx, n, c) for _, n, c in changed),
                                req.timeout_ms)
        for i, name, count in changed:
            if not _visible(ctx, name, count):
                results[i] = _Result(name=name, error_code=RequestTimedOutError.errno,
                                     error_message=None)
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
