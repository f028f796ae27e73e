"""InitProducerId (key 22), v0-5.

Idempotent producers get a fresh producer id with epoch 0 (Kafka does the same for a
non-transactional InitProducerId, KIP-360 included). Ids come from blocks the controller hands out
(ProducerIdsRecord), so they are unique across brokers and controller failovers.
Not implemented: transactions — a transactional_id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

from kafka.errors import TransactionalIdAuthorizationFailedError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from minibroker.broker.dispatch import RequestContext, handles


@handles(ApiKey.InitProducerId, InitProducerIdRequest, versions=(0, 5))
async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest):
    if req.transactional_id is not None:
        return InitProducerIdResponse(throttle_time_ms=0,
                                      error_code=TransactionalIdAuthorizationFailedError.errno,
                                      producer_id=-1, producer_epoch=-1)
    producer_id = await ctx.broker.next_producer_id()
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=producer_id,
                                  producer_epoch=0)
