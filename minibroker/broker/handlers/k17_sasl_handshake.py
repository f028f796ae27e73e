"""SaslHandshake (key 17), v0-1.

Authentication is the connection's (network/sasl.py answers SaslHandshake before it
authenticates, and at the start of a KIP-368 re-authentication). Reaching dispatch means a
listener without SASL, where Kafka's KafkaApis answers ILLEGAL_SASL_STATE.
v1: the tokens that follow travel in SaslAuthenticate (KIP-152) instead of bare frames (KIP-43).
Not implemented: —
"""
from __future__ import annotations

from kafka.errors import IllegalSaslStateError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles


@handles(ApiKey.SaslHandshake, SaslHandshakeRequest, versions=(0, 1))
async def handle_sasl_handshake(ctx: RequestContext,
                                req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=IllegalSaslStateError.errno, mechanisms=[])
