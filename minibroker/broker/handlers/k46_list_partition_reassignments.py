"""ListPartitionReassignments (key 46), v0 — KIP-455.

Forwarded to the controller: every partition moving now (topics null), or those of the named
partitions that are; each with its replica set (target + leaving) and the replicas being added
and removed. Partitions not moving, or not existing, are left out, as Kafka does.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (ListPartitionReassignmentsRequest,
                                  ListPartitionReassignmentsResponse)
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import by_topic

_Topic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_Part = _Topic.OngoingPartitionReassignment


@handles(ApiKey.ListPartitionReassignments, ListPartitionReassignmentsRequest, versions=(0, 0))
async def handle_list_partition_reassignments(ctx: RequestContext,
                                              req: ListPartitionReassignmentsRequest
        ) -> ListPartitionReassignmentsResponse:
    wanted = None if req.topics is None else {
        t.name: list(t.partition_indexes) for t in req.topics}
    moving = await ctx.controller.list_partition_reassignments(wanted)
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, topics=by_topic(
            ((topic, _Part(partition_index=pid, replicas=list(reg.replicas),
                           adding_replicas=list(reg.adding_replicas),
                           removing_replicas=list(reg.removing_replicas)))
             for topic, pid, reg in moving), _Topic))
