"""DescribeTransactions (key 65), v0: the coordinator's state of each transactional id it owns
(NOT_COORDINATOR otherwise; TRANSACTIONAL_ID_NOT_FOUND for an unknown one)."""
from __future__ import annotations

from kafka.protocol.admin import DescribeTransactionsRequest, DescribeTransactionsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import by_topic

_State = DescribeTransactionsResponse.TransactionState
_Topic = _State.TopicData


@handles(ApiKey.DescribeTransactions, DescribeTransactionsRequest, versions=(0, 0))
async def handle_describe_transactions(ctx: RequestContext, req: DescribeTransactionsRequest
        ) -> DescribeTransactionsResponse:
    out = []
    for tid in req.transactional_ids:
        code, txn = ctx.txn.describe(tid)
        if txn is None:
            out.append(_State(error_code=code, transactional_id=tid, transaction_state="",
                              transaction_timeout_ms=0, transaction_start_time_ms=-1,
                              producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        out.append(_State(error_code=0, transactional_id=tid, transaction_state=txn.state_name,
                          transaction_timeout_ms=txn.timeout_ms,
                          transaction_start_time_ms=txn.start_ms, producer_id=txn.producer_id,
                          producer_epoch=txn.producer_epoch,
                          topics=by_topic(sorted(txn.partitions), _Topic, name="topic")))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)
