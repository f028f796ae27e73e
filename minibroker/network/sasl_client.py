"""The client side of SASL for minibroker's own connections: the controller and the followers
authenticating to the brokers' control-plane and inter-broker listeners (serve --processes), and
the reference client (Admin, Producer, Consumer, the tools, Spark) with `sasl.mechanism` set.
SaslHandshake v1, then the tokens inside SaslAuthenticate v2 (KIP-152), as Kafka's Java client
does."""
from __future__ import annotations

import base64
import json
import time
from typing import TYPE_CHECKING, Any

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient
from scramp.utils import ScramException

if TYPE_CHECKING:
    from minibroker.network.client import KafkaClientConnection

MECHANISM = "SCRAM-SHA-512"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class AuthenticationFailed(ConnectionError):
    """The broker refused our credentials."""


async def _handshake(conn: KafkaClientConnection, mechanism: str) -> None:
    hs = await conn.request(SaslHandshakeRequest(mechanism=mechanism), 1)
    if hs.error_code:
        offered = ", ".join(getattr(hs, "mechanisms", []) or []) or "none"
        raise AuthenticationFailed(f"SaslHandshake {mechanism}: error {hs.error_code} "
                                   f"(the listener offers {offered})")


async def _exchange(conn: KafkaClientConnection, token: bytes) -> bytes:
    resp = await conn.request(SaslAuthenticateRequest(auth_bytes=token), 2)
    if resp.error_code:
        raise AuthenticationFailed(resp.error_message or f"SaslAuthenticate error {resp.error_code}")
    return bytes(resp.auth_bytes)


async def scram_authenticate(conn: KafkaClientConnection, user: str, password: str,
                             mechanism: str = MECHANISM) -> None:
    """The SCRAM exchange; checks the server's signature too (a listener that does not know the
    password cannot pose as the broker)."""
    await _handshake(conn, mechanism)
    client = ScramClient([mechanism], user, password)
    try:
        first = await _exchange(conn, client.get_client_first().encode())
        client.set_server_first(first.decode())
        final = await _exchange(conn, client.get_client_final().encode())
        client.set_server_final(final.decode())
    except (ScramException, UnicodeDecodeError) as e:
        raise AuthenticationFailed(f"SCRAM exchange with the broker failed: {e}") from None


def unsecured_jws(subject: str, lifetime_s: int = 3600) -> str:
    """An unsecured JWS (alg none) naming `subject`, as Kafka's unsecured login module makes
    (unsecuredLoginStringClaim_sub): for test set-ups, never for production."""
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    exp = int(time.time()) + lifetime_s     # no iat: a broker on a seeded clock may be behind us
    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'exp': exp})}."


async def authenticate(conn: KafkaClientConnection, mechanism: str, user: str, password: str
                       ) -> None:
    """Authenticate `conn` with one of MECHANISMS (OAUTHBEARER: an unsecured token for `user`)."""
    if mechanism.startswith("SCRAM-"):
        await scram_authenticate(conn, user, password, mechanism)
        return
    await _handshake(conn, mechanism)
    if mechanism == "PLAIN":
        await _exchange(conn, b"\0" + user.encode() + b"\0" + password.encode())
    elif mechanism == "OAUTHBEARER":
        await _exchange(conn, f"n,,\x01auth=Bearer {unsecured_jws(user)}\x01\x01".encode())
    else:
        raise AuthenticationFailed(f"sasl.mechanism={mechanism} is not supported "
                                   f"({', '.join(MECHANISMS)} are)")
