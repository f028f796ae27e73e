"""EndTxn (key 26), v0-4: commit or abort. Answered once PrepareCommit/PrepareAbort is in
__transaction_state; the markers follow (WriteTxnMarkers), then Complete*. A retry of an applied
EndTxn succeeds; one while its markers are being written is CONCURRENT_TRANSACTIONS.
v2+: PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588).  v3+: flexible.
Not offered: v5 (KIP-890 part 2, transaction.version 2: an epoch bump per transaction)."""
from __future__ import annotations

from kafka.errors import InvalidProducerEpochError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles


@handles(ApiKey.EndTxn, EndTxnRequest, versions=(0, 4))
async def handle_end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    fenced = 0 if ctx.api_version >= 2 else InvalidProducerEpochError.errno
    code = await ctx.txn.end_txn(req.transactional_id, req.producer_id, req.producer_epoch,
                                        req.committed, fenced)
    return EndTxnResponse(throttle_time_ms=0, error_code=code)
