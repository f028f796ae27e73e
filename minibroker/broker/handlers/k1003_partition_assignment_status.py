"""PartitionAssignmentStatus (key 1003, ours), v0 — the KIP-179 draft's progress report.

Forwarded to the controller: per target replica of each partition in the request, an error code
(PARTITION_REASSIGNMENT_IN_PROGRESS while it moves, 0 once moved) and a numerator/denominator
in offsets (see minibroker.controller.reassignment). request_id -1: the most recent request;
an unknown id: INVALID_REQUEST.
"""
from __future__ import annotations

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.protocol.messages import (PartitionAssignmentStatusRequest,
                                          PartitionAssignmentStatusResponse, PrivateApiKey)

_Replica = PartitionAssignmentStatusResponse.PartitionReplicaProgress


@handles(PrivateApiKey.PartitionAssignmentStatus, PartitionAssignmentStatusRequest,
         versions=(0, 0))
async def handle_partition_assignment_status(ctx: RequestContext,
                                             req: PartitionAssignmentStatusRequest
        ) -> PartitionAssignmentStatusResponse:
    code, request_id, progress = await ctx.controller.partition_assignment_status(
        req.request_id)
    return PartitionAssignmentStatusResponse(
        throttle_time_ms=0, error_code=code, request_id=request_id,
        replicas=[_Replica(topic=p.topic, partition=p.partition, broker=p.broker,
                           error_code=p.error_code, numerator=p.numerator,
                           denominator=p.denominator) for p in progress])
