"""CreatePartitions (key 37), v0-3.

Forwarded to the controller (create_partitions): a higher count adds partitions (with the given
replica assignments, one list of broker ids per new partition, or placed by the controller); a
lower count is KIP-253's marking for deletion (see minibroker.controller.partition_count), refused
with INVALID_PARTITIONS on a topic with enable.ordered.delivery=false. validate_only checks without
changing anything. A topic given twice is answered once with INVALID_REQUEST ("Duplicate topic
name."). Topics are answered one by one: one request may succeed for some and fail for others.

As in KRaft, the answer comes once the controller has committed, not once brokers show the new
count: brokers learn it from UpdateMetadata, which may arrive late (k06's propagation delay), so a
client may meet stale metadata for a while after success.
timeout_ms > 0 is the controller's deadline: topics not started by then answer REQUEST_TIMED_OUT
and are not changed (one under way when it passes may still complete, as in Kafka).
KIP-599 (broker/controller_quota.py): v3 topics met while the client's mutation quota is in debt
answer THROTTLING_QUOTA_EXCEEDED and are not changed, and throttle_time_ms says when to retry;
v0-v2 (the permissive quota) are always done, throttle_time_ms saying how long to back off.
Fault hooks (broker/faults.py): push_topic_errors forces one topic's answer (a (code, throttle)
pair for throttling); stall delays the controller's part so timeout_ms expires.
v1: throttle_time_ms (unchanged shape).  v2: flexible.  v3: THROTTLING_QUOTA_EXCEEDED.
"""
from __future__ import annotations

import asyncio
from typing import Any, TypeAlias

from kafka.errors import (InvalidRequestError, RequestTimedOutError,
                          ThrottlingQuotaExceededError)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import CreatePartitionsRequest, CreatePartitionsResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.protocol.framing import ProtocolViolation
from minibroker.protocol.nulls import first_null

_Result: TypeAlias = CreatePartitionsResponse.CreatePartitionsTopicResult
_KEY = int(ApiKey.CreatePartitions)
_THROTTLED: int = ThrottlingQuotaExceededError.errno
_QUOTA_MESSAGE = "The throttling quota has been exceeded."


def _mutations(ctx: RequestContext, name: str, count: int) -> int:
    """Partitions added or marked for deletion (KIP-599 counts both), by this broker's metadata."""
    t = ctx.metadata.topics.get(name)
    return abs(count - t.undeleted_partition_count) if t is not None else count


@handles(ApiKey.CreatePartitions, CreatePartitionsRequest, versions=(0, 3))
async def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest
        ) -> CreatePartitionsResponse:
    faults = ctx.faults
    quota = ctx.quota
    client_id = ctx.header.client_id or ""
    strict = ctx.api_version >= 3
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    # The topics are worked on in a task of their own, where a null the schema allows none
    # (assignments' broker_ids) would fail unseen: refused here, as dispatch does elsewhere.
    where = first_null(CreatePartitionsRequest._struct, req, ctx.api_version)
    if where:
        raise ProtocolViolation(f"CreatePartitions v{ctx.api_version}: null {where}, which is "
                                "not nullable")
    results: dict[str, _Result] = {}
    order: list[str] = []
    throttle_ms = 0
    clock = ctx.clock
    deadline = clock.monotonic() + req.timeout_ms / 1000 if req.timeout_ms > 0 else None

    async def one(t: Any) -> _Result:
        nonlocal throttle_ms
        forced, forced_throttle = faults.pop_topic_error(_KEY, t.name)
        throttle_ms = max(throttle_ms, forced_throttle)
        if forced and (forced != _THROTTLED or strict):
            return _Result(name=t.name, error_code=forced,
                           error_message=_QUOTA_MESSAGE if forced == _THROTTLED else None)
        assignments = (None if t.assignments is None
                       else [list(a.broker_ids) for a in t.assignments])
        mutations = _mutations(ctx, t.name, t.count)
        if not req.validate_only and mutations and quota.limited(client_id):
            # Kafka validates first: a bad request is answered as such, not throttled.
            res = await ctx.controller.create_partitions(t.name, t.count, assignments, True)
            if res.error_code:
                return _Result(name=t.name, error_code=res.error_code, error_message=res.message)
            refused_ms = quota.try_record(client_id, mutations, ctx.clock.now_ms(), strict)
            if refused_ms:
                throttle_ms = max(throttle_ms, refused_ms)
                return _Result(name=t.name, error_code=_THROTTLED, error_message=_QUOTA_MESSAGE)
        res = await ctx.controller.create_partitions(t.name, t.count, assignments,
                                                     req.validate_only)
        return _Result(name=t.name, error_code=res.error_code, error_message=res.message)

    async def all_topics() -> None:
        stall = faults.pop_stall_ms(_KEY)
        if stall:
            await clock.sleep(stall / 1000)
        for t in req.topics:
            if t.name in results:
                continue
            if deadline is not None and clock.monotonic() >= deadline:
                return
            if counts[t.name] > 1:
                results[t.name] = _Result(name=t.name, error_code=InvalidRequestError.errno,
                                          error_message="Duplicate topic name.")
                continue
            # Shielded: a change the controller has begun is finished even after the deadline.
            results[t.name] = await asyncio.shield(one(t))

    for t in req.topics:
        if t.name not in order:
            order.append(t.name)
    work = asyncio.ensure_future(all_topics())
    if deadline is None:
        await work
    else:
        done, _ = await asyncio.wait([work], timeout=max(0.0, deadline - clock.monotonic()))
        if not done:
            work.cancel()        # the topic under way (shielded) completes on its own
    if work.done() and not work.cancelled():
        error = work.exception()
        if error is not None:
            raise error
    out = [results.get(n) or _Result(name=n, error_code=RequestTimedOutError.errno,
                                     error_message=None) for n in order]
    if quota.limited(client_id):     # v0-v2 (permissive): done; back off for the debt
        throttle_ms = max(throttle_ms, quota.response_throttle_ms(
            client_id, ctx.clock.now_ms(), strict, 0))
    return CreatePartitionsResponse(throttle_time_ms=throttle_ms, results=out)
