"""LeaderAndIsr (key 4), v7 (last Kafka 3.x shape) plus KIP-253's tagged fields.

Sent only by the controller. Per topic: the undeleted partition count (Produce/Fetch check it) and
the topic configs (our extension, so a replica creates its log with the right settings).
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from minibroker.broker.control_requests import check_control_request
from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import on_leadership_change
from minibroker.protocol.messages import LeaderAndIsrRequest, LeaderAndIsrResponse

_Topic = LeaderAndIsrResponse.LeaderAndIsrTopicError
_Err = _Topic.LeaderAndIsrPartitionError


@handles(ApiKey.LeaderAndIsr, LeaderAndIsrRequest, versions=(7, 7))
async def handle_leader_and_isr(ctx: RequestContext, req: LeaderAndIsrRequest
        ) -> LeaderAndIsrResponse:
    err = check_control_request(ctx, req)
    if err:
        return LeaderAndIsrResponse(error_code=err, topics=[])
    topics = []
    for t in req.topic_states:
        configs = {c.name: c.value for c in (t.configs or ())}
        errs = []
        for p in t.partition_states:
            code = ctx.replica_manager.apply_partition_state(
                t.topic_name, t.topic_id, p.partition_index, p.leader, p.leader_epoch,
                p.partition_epoch, p.isr, p.replicas, t.undeleted_partition_count, configs,
                [(e.partition_index, e.leader_epoch) for e in p.leader_epoch_after_creation or ()],
                [(e.partition_index, e.leader_epoch) for e in p.leader_epoch_before_deletion or ()])
            errs.append(_Err(partition_index=p.partition_index, error_code=code))
        topics.append(_Topic(topic_id=t.topic_id, partition_errors=errs))
    on_leadership_change(ctx)
    return LeaderAndIsrResponse(error_code=0, topics=topics)
