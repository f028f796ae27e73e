"""OffsetFetch (key 9), v0-9.

v1: offsets kept in Kafka (we never used ZooKeeper: v0 reads the same store).  v2: null topics =
every committed offset, top-level error_code.  v3: throttle_time_ms.  v5: committed_leader_epoch.
v6: flexible.  v7: require_stable: a partition with a transactional offset commit not yet decided answers
UNSTABLE_OFFSET_COMMIT (the consumer retries), as Kafka.
v8: several groups per request.  v9: member_id/member_epoch (KIP-848; classic groups ignore them).
A partition without a committed offset answers offset -1, metadata "". Before v2 a group-level
error is repeated on every partition.
Not implemented: v10 (topic ids).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.coordinator.txn_offsets import has_pending

UNSTABLE_OFFSET_COMMIT = 88
_Group = OffsetFetchResponse.OffsetFetchResponseGroup
_GTopic = _Group.OffsetFetchResponseTopics
_GPart = _GTopic.OffsetFetchResponsePartitions
_Topic = OffsetFetchResponse.OffsetFetchResponseTopic
_Part = _Topic.OffsetFetchResponsePartition


# (error, [(topic, [(partition, offset, leader epoch, metadata, error)])])
Fetched = tuple[int, list[tuple[str, list[tuple[int, int, int, str, int]]]]]


def _fetch(ctx: RequestContext, group_id: str, topics: Iterable[Any] | None,
           require_stable: bool = False) -> Fetched:
    wanted = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    code, found = ctx.groups.offsets.fetch_offsets(group_id, wanted)
    if code and wanted is not None and ctx.api_version < 2:
        # v0/1 have no top-level error: put it on every partition.
        found = [(t, [(p, -1, -1, "", code) for p in ps]) for t, ps in wanted]
    if not code and require_stable:
        shard, _ = ctx.groups.shard_for(group_id)
        if shard is not None and shard.pending_txn_offsets:
            found = [(t, [(p, -1, -1, "", UNSTABLE_OFFSET_COMMIT)
                          if has_pending(shard, group_id, t, p) else (p, o, e, m, c)
                          for p, o, e, m, c in parts]) for t, parts in found]
    return code, found


@handles(ApiKey.OffsetFetch, OffsetFetchRequest, versions=(0, 9))
async def handle_offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.api_version >= 8:
        groups = []
        for g in req.groups:
            code, found = _fetch(ctx, g.group_id, g.topics, bool(req.require_stable))
            groups.append(_Group(group_id=g.group_id, error_code=code, topics=[
                _GTopic(name=t, partitions=[
                    _GPart(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                           metadata=m, error_code=c) for p, o, e, m, c in parts])
                for t, parts in found]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    topics = req.topics if ctx.api_version >= 2 else (req.topics or [])
    code, found = _fetch(ctx, req.group_id, topics,
                         ctx.api_version >= 7 and bool(req.require_stable))
    return OffsetFetchResponse(
        throttle_time_ms=0, error_code=code,
        topics=[_Topic(name=t, partitions=[
            _Part(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                  error_code=c) for p, o, e, m, c in parts]) for t, parts in found])
