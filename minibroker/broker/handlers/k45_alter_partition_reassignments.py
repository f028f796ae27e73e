"""AlterPartitionReassignments (key 45), v0-1 — KIP-455, Kafka's reassignment API.

Forwarded to the controller, which runs it on the KIP-179 machinery
(minibroker.controller.reassignment.plan_alter): the partitions given replicas start moving as
one request (follow it with PartitionAssignmentStatus -1, or ListPartitionReassignments), null
replicas cancel that partition's running move. Errors per partition: UNKNOWN_TOPIC_OR_PARTITION,
INVALID_REPLICA_ASSIGNMENT (empty, repeated or unregistered brokers), INVALID_REPLICATION_FACTOR
(v1, allow_replication_factor_change false), NO_REASSIGNMENT_IN_PROGRESS (cancel with none
running), REASSIGNMENT_IN_PROGRESS (one reassignment runs at a time).
v1: allow_replication_factor_change (request and response).
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (AlterPartitionReassignmentsRequest,
                                  AlterPartitionReassignmentsResponse)
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import by_topic

_Topic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_Part = _Topic.ReassignablePartitionResponse


@handles(ApiKey.AlterPartitionReassignments, AlterPartitionReassignmentsRequest, versions=(0, 1))
async def handle_alter_partition_reassignments(ctx: RequestContext,
                                               req: AlterPartitionReassignmentsRequest
        ) -> AlterPartitionReassignmentsResponse:
    allow = req.allow_replication_factor_change if ctx.api_version >= 1 else True
    items = [(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
             for t in req.topics for p in t.partitions]
    results = await ctx.controller.alter_partition_reassignments(items, allow)
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=allow, error_code=0,
        error_message=None, responses=by_topic(
            ((topic, _Part(partition_index=pid, error_code=code, error_message=msg))
             for topic, pid, code, msg in results), _Topic))
