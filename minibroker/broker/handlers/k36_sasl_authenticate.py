"""SaslAuthenticate (key 36), v0-2.

network/sasl.py answers it while a SASL listener's connection authenticates. Reaching dispatch
means no exchange is in progress (a listener without SASL, or after authentication), where
Kafka's KafkaApis answers ILLEGAL_SASL_STATE.
v1: session_lifetime_ms (KIP-368).  v2: flexible.
Not implemented: —
"""
from __future__ import annotations

from kafka.errors import IllegalSaslStateError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslAuthenticateResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles


@handles(ApiKey.SaslAuthenticate, SaslAuthenticateRequest, versions=(0, 2))
async def handle_sasl_authenticate(ctx: RequestContext,
                                   req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=IllegalSaslStateError.errno,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"", session_lifetime_ms=0)
