"""FindCoordinator (key 10), v0-4.

v1: key_type, throttle_time_ms, error_message.  v3: flexible.  v4: batched coordinator_keys.
key_type 0 (group): the leader of __consumer_offsets partition abs(javaHashCode(key)) % partitions.
The topic is created through the controller on the first lookup; until its partition has a leader
the answer is COORDINATOR_NOT_AVAILABLE (retriable).
key_type 1 (transaction): the leader of __transaction_state partition abs(javaHashCode(key)) %
partitions, the topic created the same way. Other key types: INVALID_REQUEST.
"""
from __future__ import annotations

import kafka.errors as Errors
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles

_Coordinator = FindCoordinatorResponse.Coordinator
GROUP, TRANSACTION = 0, 1


def _message(code: int) -> str:
    return "NONE" if code == 0 else Errors.for_code(code).description


def _lookup(ctx: RequestContext, key: str, key_type: int) -> tuple[int, int, str, int]:
    """(error, node_id, host, port)."""
    if key_type == TRANSACTION:
        code, node_id = ctx.txn.coordinator_for(key)
    elif key_type == GROUP:
        code, node_id = ctx.groups.coordinator_for(key)
    else:
        return Errors.InvalidRequestError.errno, -1, "", -1
    if code:
        return code, -1, "", -1
    host, port = ctx.metadata.brokers[node_id].address(ctx.listener)
    return 0, node_id, host, port


@handles(ApiKey.FindCoordinator, FindCoordinatorRequest, versions=(0, 4))
async def handle_find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest
        ) -> FindCoordinatorResponse:
    key_type = req.key_type if ctx.api_version >= 1 else GROUP
    if ctx.api_version >= 4:
        coordinators = []
        for key in req.coordinator_keys:
            code, node_id, host, port = _lookup(ctx, key, key_type)
            coordinators.append(_Coordinator(key=key, node_id=node_id, host=host, port=port,
                                             error_code=code, error_message=_message(code)))
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    code, node_id, host, port = _lookup(ctx, req.key, key_type)
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=code,
                                   error_message=_message(code), node_id=node_id, host=host,
                                   port=port)
