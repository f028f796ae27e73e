"""ElectLeaders (key 43), v0-2 (KIP-183, KIP-460): preferred (0) or unclean (1) leader election,
forwarded to the controller (controller/elections.py), which answers per partition.

v0: preferred only, no top-level error.  v1: election_type, top-level error_code.  v2: flexible.
Null topic_partitions: every partition that needs an election. A partition named twice is
answered once. The election is committed before the answer; brokers learn it by LeaderAndIsr
right after (timeout_ms is not waited on further).
"""
from __future__ import annotations

from typing import Any

from kafka.errors import InvalidRequestError
from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import by_topic

_Result = ElectLeadersResponse.ReplicaElectionResult
_Partition = _Result.PartitionResult
PREFERRED, UNCLEAN = 0, 1


@handles(ApiKey.ElectLeaders, ElectLeadersRequest, versions=(0, 2))
async def handle_elect_leaders(ctx: RequestContext, req: ElectLeadersRequest
        ) -> ElectLeadersResponse:
    election_type = req.election_type if ctx.api_version >= 1 else PREFERRED
    wanted = None
    if req.topic_partitions is not None:
        wanted = sorted({(t.topic, p) for t in req.topic_partitions for p in t.partitions})
    if election_type not in (PREFERRED, UNCLEAN):
        return ElectLeadersResponse(throttle_time_ms=0, error_code=InvalidRequestError.errno,
                                    replica_election_results=[])
    answers = await ctx.controller.elect_leaders(election_type, wanted)
    return ElectLeadersResponse(
        throttle_time_ms=0, error_code=0, replica_election_results=by_topic(
            ((topic, _Partition(partition_id=partition, error_code=code, error_message=message))
             for topic, partition, code, message in sorted(answers, key=lambda a: a[0])),
            _Result, name="topic", partitions="partition_result"))
