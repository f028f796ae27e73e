"""ListOffsets (key 2), v1-9.

replica_id -2 (debugging) and >= 0 get the log end offset for -1; consumers the HW. As Kafka's
fetchOnlyFromLeader, -2 is answered by any replica (a follower's own log), others by the leader.
Timestamps: -2 earliest, -1 latest (high watermark; last stable offset for read_committed),
-3 max timestamp (KIP-734), -4 earliest local (= earliest, no tiered storage), -5 latest tiered
(= -1/-1 with no tiered storage), >= 0 the first offset with a timestamp >= it.
v4: current_leader_epoch fencing.  v6: flexible.  Not implemented: v0 old-style offsets.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import per_partition

_Topic = ListOffsetsResponse.ListOffsetsTopicResponse
_Part = _Topic.ListOffsetsPartitionResponse


@handles(ApiKey.ListOffsets, ListOffsetsRequest, versions=(1, 9))
async def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    def list_offset(t: Any, rp: Any) -> Any:
        err, offset, ts, epoch = ctx.replica_manager.list_offset(
            t.name, rp.partition_index, rp.current_leader_epoch, rp.timestamp,
            req.isolation_level, req.replica_id)
        return _Part(partition_index=rp.partition_index, error_code=err, timestamp=ts,
                     offset=offset, leader_epoch=epoch, old_style_offsets=[])
    return ListOffsetsResponse(throttle_time_ms=0, topics=per_partition(req.topics, _Topic,
                                                                        list_offset))
