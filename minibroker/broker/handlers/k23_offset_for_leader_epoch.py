"""OffsetForLeaderEpoch (key 23), v2-4.

For consumers (replica_id -1), followers (replica_id >= 0) and debugging tools (-2, which may also
ask a follower replica). Per partition: the largest epoch <= leader_epoch this replica knows and
its end offset (the log end offset for the latest epoch), from the leader epoch cache; an epoch
the replica does not know answers (-1, -1) with no error, as Kafka does. Nothing is capped at the
high watermark, as in Kafka.
v2: current_leader_epoch fencing (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), throttle_time_ms.
v3: replica_id.  v4: flexible.  Not implemented: v0-1 (pre-KIP-320 shapes).
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import per_partition
from minibroker.broker.partition_reads import DEBUGGING_REPLICA_ID

_Topic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_Part = _Topic.EpochEndOffset


@handles(ApiKey.OffsetForLeaderEpoch, OffsetForLeaderEpochRequest, versions=(2, 4))
async def handle_offset_for_leader_epoch(ctx: RequestContext, req: OffsetForLeaderEpochRequest
        ) -> OffsetForLeaderEpochResponse:
    any_replica = ctx.api_version >= 3 and req.replica_id == DEBUGGING_REPLICA_ID

    def end_offset(t: Any, rp: Any) -> Any:
        err, epoch, offset = ctx.replica_manager.end_offset_for_epoch(
            t.topic, rp.partition, rp.current_leader_epoch, rp.leader_epoch, any_replica)
        return _Part(error_code=err, partition=rp.partition, leader_epoch=epoch, end_offset=offset)
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=per_partition(
        req.topics, _Topic, end_offset, name="topic"))
