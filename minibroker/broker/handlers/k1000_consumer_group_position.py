"""ConsumerGroupPosition (key 1000, ours), v0 — KIP-253 parts 3, 4 and 7.

A member reports its positions of the partitions the coordinator asked for and asks for the
group's positions of the partitions its ordering barrier waits on; the coordinator answers those
positions (-1 unknown) and which of the member's partitions others want (NeedPosition).  The
group coordinator answers; other brokers say NOT_COORDINATOR.  See minibroker.coordinator.positions.

Classic groups: (GenerationId, MemberId) is the member's generation, checked as Heartbeat does
(UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS while PreparingRebalance); it owns
the partitions of its SyncGroup assignment ('consumer' protocol bytes).
KIP-848 consumer groups: GenerationId carries the member epoch (as OffsetCommit's
generation_id_or_member_epoch does); an unknown MemberId is UNKNOWN_MEMBER_ID and an epoch other
than the member's current one STALE_MEMBER_EPOCH, as Kafka's OffsetCommit/OffsetFetch checks of a
consumer group member; no REBALANCE_IN_PROGRESS (members reconcile one by one). The member owns
its assigned partitions plus those pending revocation (it consumes them until it acknowledges).
Not implemented: —
"""
from __future__ import annotations

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.protocol.messages import (ConsumerGroupPositionRequest,
                                          ConsumerGroupPositionResponse, PrivateApiKey)

_Topic = ConsumerGroupPositionResponse.ConsumerGroupPositionResponseTopic
_Part = _Topic.ConsumerGroupPositionResponsePartition


@handles(PrivateApiKey.ConsumerGroupPosition, ConsumerGroupPositionRequest, versions=(0, 0))
async def handle_consumer_group_position(ctx: RequestContext, req: ConsumerGroupPositionRequest
                                         ) -> ConsumerGroupPositionResponse:
    code, topics = ctx.groups.positions.consumer_group_position(
        req.group_id, req.generation_id, req.member_id,
        [(t.topic, [(p.partition, p.need_position, p.position) for p in t.partitions])
         for t in req.topics])
    return ConsumerGroupPositionResponse(throttle_time_ms=0, error_code=code, topics=[
        _Topic(topic=t, partitions=[_Part(partition=p, need_position=need, position=pos)
                                    for p, need, pos in parts]) for t, parts in topics])
