"""InitProducerId (key 22), v0-5.

Idempotent producers (no transactional_id) get a fresh producer id with epoch 0 (Kafka does the
same for a non-transactional InitProducerId, KIP-360 included). Ids come from blocks the
controller hands out (ProducerIdsRecord), so they are unique across brokers and controller
failovers. A transactional_id goes to this broker's transaction coordinator
(minibroker.coordinator.txn): its id, the epoch bumped (fencing the previous producer), an open
transaction aborted first (CONCURRENT_TRANSACTIONS, the client retries).
v3: producer_id/epoch of a producer recovering its own (KIP-360).  v4: PRODUCER_FENCED instead of
INVALID_PRODUCER_EPOCH (KIP-588).  v2+: flexible.
"""
from __future__ import annotations

from kafka.errors import InvalidProducerEpochError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles


@handles(ApiKey.InitProducerId, InitProducerIdRequest, versions=(0, 5))
async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest
        ) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        v3 = ctx.api_version >= 3
        code, pid, epoch = await ctx.txn.init_producer_id(
            req.transactional_id, req.transaction_timeout_ms,
            req.producer_id if v3 else -1, req.producer_epoch if v3 else -1,
            fenced_code=0 if ctx.api_version >= 4 else InvalidProducerEpochError.errno)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=pid,
                                      producer_epoch=epoch)
    producer_id = await ctx.node.next_producer_id()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                                  producer_epoch=0)
