"""AddOffsetsToTxn (key 25), v0-4: the group's __consumer_offsets partition joins the transaction,
so that the group's TxnOffsetCommit offsets are committed or dropped by its markers.
v2+: PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588).  v3+: flexible."""
from __future__ import annotations

from kafka.errors import InvalidProducerEpochError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.coordinator.offsets import OFFSETS_TOPIC


@handles(ApiKey.AddOffsetsToTxn, AddOffsetsToTxnRequest, versions=(0, 4))
async def handle_add_offsets_to_txn(ctx: RequestContext, req: AddOffsetsToTxnRequest
        ) -> AddOffsetsToTxnResponse:
    tp = (OFFSETS_TOPIC, ctx.groups.partition_for(req.group_id))
    fenced = 0 if ctx.api_version >= 2 else InvalidProducerEpochError.errno
    codes = await ctx.txn.add_partitions(req.transactional_id, req.producer_id,
                                                req.producer_epoch, [tp], fenced)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=codes[tp])
