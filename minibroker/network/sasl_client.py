"""The client side of SASL/SCRAM for minibroker's own connections: the controller authenticating
to the brokers' control-plane listeners when they are TCP (serve --processes)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient
from scramp.utils import ScramException

if TYPE_CHECKING:
    from minibroker.network.client import KafkaClientConnection

MECHANISM = "SCRAM-SHA-512"


class AuthenticationFailed(ConnectionError):
    """The broker refused our credentials."""


async def scram_authenticate(conn: KafkaClientConnection, user: str, password: str, mechanism: str = MECHANISM) -> None:
    """SaslHandshake v1, then the SCRAM exchange in SaslAuthenticate v2; checks the server's
    signature too (a listener that does not know the password cannot pose as the broker)."""
    hs = await conn.request(SaslHandshakeRequest(mechanism=mechanism), 1)
    if hs.error_code:
        raise AuthenticationFailed(f"SaslHandshake {mechanism}: error {hs.error_code}")
    client = ScramClient([mechanism], user, password)
    try:
        first = await conn.request(SaslAuthenticateRequest(
            auth_bytes=client.get_client_first().encode()), 2)
        if first.error_code:
            raise AuthenticationFailed(first.error_message or f"error {first.error_code}")
        client.set_server_first(bytes(first.auth_bytes).decode())
        final = await conn.request(SaslAuthenticateRequest(
            auth_bytes=client.get_client_final().encode()), 2)
        if final.error_code:
            raise AuthenticationFailed(final.error_message or f"error {final.error_code}")
        client.set_server_final(bytes(final.auth_bytes).decode())
    except (ScramException, UnicodeDecodeError) as e:
        raise AuthenticationFailed(f"SCRAM exchange with the broker failed: {e}") from None
