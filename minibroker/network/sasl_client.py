"""The client side of SASL for minibroker's own connections: the controller and the followers
authenticating to the brokers' control-plane and inter-broker listeners (serve --processes), and
the reference client (Admin, Producer, Consumer, the tools, Spark) with `sasl.mechanism` set.
SaslHandshake v1, then the tokens inside SaslAuthenticate v2 (KIP-152), as Kafka's Java client
does.

KIP-368: each exchange returns the broker's session lifetime (SaslAuthenticate's
session_lifetime_ms; 0: the session never expires). `SessionReauth` re-authenticates a
connection before it expires, as Kafka's SaslClientAuthenticator does: at a random point between
85% and 95% of the lifetime (so many connections do not re-authenticate together, and none
after the broker's deadline), between requests (network/client.py holds them meanwhile)."""
from __future__ import annotations

import base64
import json
import logging
import random
import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient
from scramp.utils import ScramException

if TYPE_CHECKING:
    from minibroker.network.client import KafkaClientConnection

log = logging.getLogger("minibroker.network.sasl_client")

MECHANISM = "SCRAM-SHA-512"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class AuthenticationFailed(ConnectionError):
    """The broker refused our credentials."""


async def _handshake(conn: KafkaClientConnection, mechanism: str) -> None:
    hs = await conn.request(SaslHandshakeRequest(mechanism=mechanism), 1, authenticating=True)
    if hs.error_code:
        offered = ", ".join(getattr(hs, "mechanisms", []) or []) or "none"
        raise AuthenticationFailed(f"SaslHandshake {mechanism}: error {hs.error_code} "
                                   f"(the listener offers {offered})")


async def _exchange(conn: KafkaClientConnection, token: bytes) -> tuple[bytes, int]:
    """The broker's answer to `token`, and the session lifetime it gives (ms; 0: none)."""
    resp = await conn.request(SaslAuthenticateRequest(auth_bytes=token), 2, authenticating=True)
    if resp.error_code:
        raise AuthenticationFailed(resp.error_message or f"SaslAuthenticate error {resp.error_code}")
    return bytes(resp.auth_bytes), int(resp.session_lifetime_ms)


async def scram_authenticate(conn: KafkaClientConnection, user: str, password: str,
                             mechanism: str = MECHANISM) -> int:
    """The SCRAM exchange; checks the server's signature too (a listener that does not know the
    password cannot pose as the broker). Returns the session lifetime (ms; 0: none)."""
    await _handshake(conn, mechanism)
    client = ScramClient([mechanism], user, password)
    try:
        first, _ = await _exchange(conn, client.get_client_first().encode())
        client.set_server_first(first.decode())
        final, lifetime_ms = await _exchange(conn, client.get_client_final().encode())
        client.set_server_final(final.decode())
    except (ScramException, UnicodeDecodeError) as e:
        raise AuthenticationFailed(f"SCRAM exchange with the broker failed: {e}") from None
    return lifetime_ms


def unsecured_jws(subject: str, lifetime_s: int = 3600) -> str:
    """An unsecured JWS (alg none) naming `subject`, as Kafka's unsecured login module makes
    (unsecuredLoginStringClaim_sub): for test set-ups, never for production."""
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()
    exp = int(time.time()) + lifetime_s     # no iat: a broker on a seeded clock may be behind us
    return f"{part({'alg': 'none'})}.{part({'sub': subject, 'exp': exp})}."


async def authenticate(conn: KafkaClientConnection, mechanism: str, user: str, password: str
                       ) -> int:
    """Authenticate `conn` with one of MECHANISMS (OAUTHBEARER: an unsecured token for `user`);
    returns the session lifetime (ms; 0: none)."""
    if mechanism.startswith("SCRAM-"):
        return await scram_authenticate(conn, user, password, mechanism)
    await _handshake(conn, mechanism)
    if mechanism == "PLAIN":
        token = b"\0" + user.encode() + b"\0" + password.encode()
    elif mechanism == "OAUTHBEARER":
        token = f"n,,\x01auth=Bearer {unsecured_jws(user)}\x01\x01".encode()
    else:
        raise AuthenticationFailed(f"sasl.mechanism={mechanism} is not supported "
                                   f"({', '.join(MECHANISMS)} are)")
    return (await _exchange(conn, token))[1]


# KIP-368's window (SaslClientAuthenticator.ReauthInfo): 85% of the lifetime for network latency
# and clock drift, plus up to 10% of jitter.
REAUTH_AT, REAUTH_JITTER = 0.85, 0.10


class SessionReauth:
    """A connection's `reauth` (network/client.Reauthentication): due at a random point of
    [85%, 95%] of the session lifetime after the last exchange ended; `login(conn)` runs the
    exchange again and returns the new lifetime. `now` is monotonic seconds (a Clock's), `rng`
    a seeded random.Random."""

    def __init__(self, login: Callable[[KafkaClientConnection], Awaitable[int]],
                 now: Callable[[], float], rng: random.Random) -> None:
        self.login = login
        self.now = now
        self.rng = rng
        self.at: float | None = None        # when the next re-authentication is due
        self.count = 0                      # re-authentications done

    def schedule(self, lifetime_ms: int) -> None:
        """After an exchange: the broker gave the session `lifetime_ms` (0: it never expires)."""
        if lifetime_ms <= 0:
            self.at = None
            return
        share = REAUTH_AT + self.rng.random() * REAUTH_JITTER
        self.at = self.now() + lifetime_ms * share / 1000

    def due(self) -> bool:
        return self.at is not None and self.now() >= self.at

    async def __call__(self, conn: KafkaClientConnection) -> None:
        self.at = None
        try:
            lifetime_ms = await self.login(conn)
        except AuthenticationFailed as e:
            log.warning("re-authentication to %s failed: %s", conn.peer(), e)
            raise
        self.count += 1
        log.debug("re-authenticated to %s; session lifetime %d ms", conn.peer(), lifetime_ms)
        self.schedule(lifetime_ms)
