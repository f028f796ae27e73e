"""OffsetCommit (key 8), v0-9.

v1: generation_id, member_id, per-partition commit_timestamp (v1 only).  v2-4: retention_time_ms
(an explicit expire timestamp, stored in an OffsetCommitValue v1 like Kafka).  v3:
throttle_time_ms.  v6: committed_leader_epoch.  v7: group_instance_id (KIP-345).  v8: flexible.
v9: KIP-848 member epoch naming (classic groups: the generation).
Answers once the offset records reached the high watermark of the group's __consumer_offsets
partition (acks=all). Unknown topic-partitions: UNKNOWN_TOPIC_OR_PARTITION; metadata over
offset.metadata.max.bytes (4096): OFFSET_METADATA_TOO_LARGE.
Not implemented: v10 (topic ids); transactional offset commits (TxnOffsetCommit).
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import partition_codes

_Topic = OffsetCommitResponse.OffsetCommitResponseTopic
_Partition = _Topic.OffsetCommitResponsePartition


@handles(ApiKey.OffsetCommit, OffsetCommitRequest, versions=(0, 9))
async def handle_offset_commit(ctx: RequestContext, req: OffsetCommitRequest
        ) -> OffsetCommitResponse:
    v = ctx.api_version
    offsets = [(t.name, p.partition_index, p.committed_offset,
                p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata,
                p.commit_timestamp if v == 1 else -1) for t in req.topics for p in t.partitions]
    retention = req.retention_time_ms if 2 <= v <= 4 else -1
    results = await ctx.groups.offsets.commit_offsets(
        req.group_id, req.generation_id_or_member_epoch if v >= 1 else -1,
        req.member_id if v >= 1 else "", req.group_instance_id if v >= 7 else None,
        retention, offsets)
    return OffsetCommitResponse(throttle_time_ms=0,
                                topics=partition_codes(req.topics, _Topic, _Partition, results))
