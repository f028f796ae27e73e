"""ListOffsets (key 2), v1-9.

replica_id -2 (debugging) and >= 0 get the log end offset for -1; consumers the HW. As Kafka's
fetchOnlyFromLeader, -2 is answered by any replica (a follower's own log), others by the leader.
Timestamps: -2 earliest, -1 latest (high watermark; last stable offset for read_committed),
-3 max timestamp (KIP-734), -4 earliest local (= earliest, no tiered storage), -5 latest tiered
(= -1/-1 with no tiered storage), >= 0 the first offset with a timestamp >= it.
v4: current_leader_epoch fencing.  v6: flexible.  Not implemented: v0 old-style offsets.
"""
from __future__ import annotations

from kafka.errors import OffsetNotAvailableError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from minibroker.broker.dispatch import RequestContext, handles

_Topic = ListOffsetsResponse.ListOffsetsTopicResponse
_Part = _Topic.ListOffsetsPartitionResponse

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5


DEBUGGING_REPLICA_ID = -2


def lookup(p, ts: int, isolation_level: int, replica_id: int = -1) -> tuple[int, int]:
    if ts in (EARLIEST, EARLIEST_LOCAL):
        return p.log.log_start_offset, -1
    if ts == LATEST and (replica_id >= 0 or replica_id == DEBUGGING_REPLICA_ID):
        return p.log.log_end_offset, -1          # Kafka: replicas and debugging see the LEO
    if ts == LATEST:
        return (p.last_stable_offset() if isolation_level else p.high_watermark), -1
    if ts == LATEST_TIERED:
        return -1, -1
    if ts == MAX_TIMESTAMP:
        found = p.log.max_timestamp_offset()
        return (found[0], found[1]) if found else (-1, -1)
    found = p.log.offset_for_timestamp(ts)
    if found is None or found[0] >= p.high_watermark:
        return -1, -1
    return found


@handles(ApiKey.ListOffsets, ListOffsetsRequest, versions=(1, 9))
async def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest):
    rm = ctx.broker.replica_manager
    topics = []
    for t in req.topics:
        parts = []
        for rp in t.partitions:
            # Kafka's fetchOnlyFromLeader: the debugging replica id reads any replica's log.
            p, err = rm.leader_partition(t.name, rp.partition_index, rp.current_leader_epoch,
                                         leader_only=req.replica_id != DEBUGGING_REPLICA_ID)
            if err:
                parts.append(_Part(partition_index=rp.partition_index, error_code=err,
                                   timestamp=-1, offset=-1, leader_epoch=-1, old_style_offsets=[]))
                continue
            if rp.timestamp == LATEST and p.is_leader and \
                    p.high_watermark < p.leader_epoch_start_offset:
                # KIP-207: a new leader's HW may lag the previous leader's; don't answer low.
                parts.append(_Part(partition_index=rp.partition_index,
                                   error_code=OffsetNotAvailableError.errno, timestamp=-1,
                                   offset=-1, leader_epoch=-1, old_style_offsets=[]))
                continue
            offset, ts = lookup(p, rp.timestamp, req.isolation_level, req.replica_id)
            epoch = p.log.epochs.epoch_for_offset(offset) if offset >= 0 else -1
            parts.append(_Part(partition_index=rp.partition_index, error_code=0, timestamp=ts,
                               offset=offset, leader_epoch=epoch if epoch is not None else -1,
                               old_style_offsets=[]))
        topics.append(_Topic(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
