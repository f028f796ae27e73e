"""AddPartitionsToTxn (key 24), v0-5.

v0-3 (clients): one transaction; the partitions join it (Ongoing), written to __transaction_state
before the answer.  v2+: PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588).
v3+: flexible.  v4-5 (brokers, KIP-890): batched transactions, and verify_only, which asks
whether partitions are already in the transaction (a leader before a transactional append).
"""
from __future__ import annotations

from typing import Any

from kafka.errors import InvalidProducerEpochError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import by_topic

_Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
_TopicResult = _Result.AddPartitionsToTxnTopicResult
_PartResult = _TopicResult.AddPartitionsToTxnPartitionResult


def _topics(codes: dict[tuple[str, int], int]) -> list[Any]:
    return by_topic(((topic, _PartResult(partition_index=partition, partition_error_code=code))
                     for (topic, partition), code in codes.items()),
                    _TopicResult, partitions="results_by_partition")


@handles(ApiKey.AddPartitionsToTxn, AddPartitionsToTxnRequest, versions=(0, 5))
async def handle_add_partitions_to_txn(ctx: RequestContext, req: AddPartitionsToTxnRequest
        ) -> AddPartitionsToTxnResponse:
    txn = ctx.txn
    fenced = 0 if ctx.api_version >= 2 else InvalidProducerEpochError.errno
    if ctx.api_version <= 3:
        tps = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
        codes = await txn.add_partitions(req.v3_and_below_transactional_id,
                                         req.v3_and_below_producer_id,
                                         req.v3_and_below_producer_epoch, tps, fenced)
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_topics(codes))
    results = []
    for t in req.transactions:
        tps = [(tt.name, p) for tt in t.topics for p in tt.partitions]
        codes = await txn.add_partitions(t.transactional_id, t.producer_id, t.producer_epoch, tps,
                                         fenced, verify_only=t.verify_only)
        results.append(_Result(transactional_id=t.transactional_id, topic_results=_topics(codes)))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0,
                                      results_by_transaction=results)
