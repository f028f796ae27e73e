"""StopReplica (key 5), v4. Sent only by the controller; delete_partition removes the log."""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from minibroker.broker.control_requests import check_control_request
from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import on_leadership_change
from minibroker.protocol.messages import StopReplicaRequest, StopReplicaResponse

_Err = StopReplicaResponse.StopReplicaPartitionError


@handles(ApiKey.StopReplica, StopReplicaRequest, versions=(4, 4))
async def handle_stop_replica(ctx: RequestContext, req: StopReplicaRequest) -> StopReplicaResponse:
    err = check_control_request(ctx, req)
    if err:
        return StopReplicaResponse(error_code=err, partition_errors=[])
    errs = []
    for t in req.topic_states:
        for p in t.partition_states:
            code = ctx.replica_manager.stop_replica(t.topic_name, p.partition_index,
                                                    p.delete_partition)
            errs.append(_Err(topic_name=t.topic_name, partition_index=p.partition_index,
                             error_code=code))
    on_leadership_change(ctx)
    return StopReplicaResponse(error_code=0, partition_errors=errs)
