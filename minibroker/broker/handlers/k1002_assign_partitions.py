"""AssignPartitions (key 1002, ours), v0 — the KIP-179 draft's broker-mediated reassignment.

Any broker takes it and forwards it to the controller (minibroker.controller.reassignment), which
answers with the request id to ask PartitionAssignmentStatus about, and an error code per
(topic, partition, broker). The call returns once the reassignment has started, not finished.
"""
from __future__ import annotations

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.protocol.messages import (AssignPartitionsRequest, AssignPartitionsResponse,
                                          PrivateApiKey)

_Result = AssignPartitionsResponse.PartitionAssignmentResult


@handles(PrivateApiKey.AssignPartitions, AssignPartitionsRequest, versions=(0, 0))
async def handle_assign_partitions(ctx: RequestContext, req: AssignPartitionsRequest
        ) -> AssignPartitionsResponse:
    accepted = await ctx.controller.assign_partitions(
        [(a.topic, a.partition, list(a.brokers)) for a in req.assignments])
    return AssignPartitionsResponse(
        throttle_time_ms=0, error_code=accepted.error_code, error_message=accepted.error_message,
        request_id=accepted.request_id,
        results=[_Result(topic=t, partition=p, broker=b, error_code=code)
                 for t, p, b, code in accepted.results])
