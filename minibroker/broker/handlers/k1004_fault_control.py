"""FaultControl (key 1004, ours), v0 — faults on demand over the wire (`minibroker faults`).

The broker only passes the command to the cluster's FaultAdmin (broker/fault_admin.py), set by
`serve --faults` (Cluster.enable_fault_admin); without one the answer is
CLUSTER_AUTHORIZATION_FAILED. Faults never apply to this API itself (Faults.intercept), so a
client can always heal what it broke.
"""
from __future__ import annotations

from kafka.errors import ClusterAuthorizationFailedError

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.protocol.messages import FaultControlRequest, FaultControlResponse, PrivateApiKey

OFF = "fault injection is off: start the cluster with `minibroker serve --faults`"


@handles(PrivateApiKey.FaultControl, FaultControlRequest, versions=(0, 0))
async def handle_fault_control(ctx: RequestContext, req: FaultControlRequest
        ) -> FaultControlResponse:
    admin = ctx.node.fault_admin
    if admin is None:
        return FaultControlResponse(throttle_time_ms=0,
                                    error_code=ClusterAuthorizationFailedError.errno,
                                    error_message=OFF, controller_id=-1, state="{}")
    return await admin.handle(req, ctx.node_id)
