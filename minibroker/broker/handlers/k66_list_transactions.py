"""ListTransactions (key 66), v0-1: the transactional ids this broker coordinates, filtered by
state names, producer ids and (v1) running longer than duration_filter ms. Unknown state names are
echoed in unknown_state_filters, as Kafka."""
from __future__ import annotations

from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.coordinator.txn.records import STATE_NAMES
from minibroker.security.acl import AclOperation as Op, ResourceType as RT

_State = ListTransactionsResponse.TransactionState


@handles(ApiKey.ListTransactions, ListTransactionsRequest, versions=(0, 1))
async def handle_list_transactions(ctx: RequestContext, req: ListTransactionsRequest
        ) -> ListTransactionsResponse:
    states = set(req.state_filters or ())
    pids = set(req.producer_id_filters or ())
    duration = req.duration_filter if ctx.api_version >= 1 and req.duration_filter is not None else -1
    now = ctx.clock.now_ms()
    out = []
    for txn in ctx.txn.list_transactions():
        if states and txn.state_name not in states:
            continue
        if pids and txn.producer_id not in pids:
            continue
        if duration >= 0 and (not txn.ongoing or now - txn.start_ms < duration):
            continue
        if not ctx.authorize(Op.DESCRIBE, RT.TRANSACTIONAL_ID, txn.transactional_id):
            continue                        # KIP-11: only those the principal may DESCRIBE
        out.append(_State(transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                          transaction_state=txn.state_name))
    return ListTransactionsResponse(throttle_time_ms=0, error_code=0,
                                    unknown_state_filters=sorted(states - set(STATE_NAMES)),
                                    transaction_states=out)
