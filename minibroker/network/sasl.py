"""SASL authentication of a connection, before anything reaches dispatch (Kafka's
SaslServerAuthenticator).

`SaslGate(inner, ...)` is a listener's `handle(conn, frame)` on a SASL_PLAINTEXT or SASL_SSL
listener. Before a connection authenticates it serves ApiVersions (once, first), SaslHandshake and
the SASL tokens; any other request closes the connection with a log line, as Kafka does. KIP-43:
after SaslHandshake v0 the tokens travel as bare size-prefixed frames; after v1, inside
SaslAuthenticate (KIP-152; v1+ answers the session lifetime). A failure gets Kafka's error and
message, then the close, after connection.failed.authentication.delay.ms.

KIP-368: with connections.max.reauth.ms (or an OAUTHBEARER token's expiry) the session has a
lifetime; past it, any request but a SaslHandshake that starts re-authentication closes the
connection. Re-authentication must keep the mechanism and the principal.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from kafka.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.sasl import (
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse)

from minibroker.protocol.framing import (
    API_PREFIX, ProtocolViolation, frame_parts, parse_request_header, response_header)
from minibroker.security.credentials import CredentialStore
from minibroker.security.principal import KafkaPrincipal
from minibroker.security.sasl import SaslAuthenticationFailed, SaslServer, new_server

log = logging.getLogger("minibroker.network.sasl")

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
HANDSHAKE_VERSIONS = (0, 1)
AUTHENTICATE_VERSIONS = (0, 2)

# Connection states (SaslServerAuthenticator.SaslState).
HANDSHAKE_OR_VERSIONS, HANDSHAKE, AUTHENTICATE, COMPLETE, FAILED = range(5)


@dataclass(slots=True)
class SaslSettings:
    mechanisms: tuple[str, ...]             # sasl.enabled.mechanisms
    credentials: CredentialStore
    now_ms: Callable[[], int]               # the cluster's wall clock
    max_reauth_ms: int = 0                  # connections.max.reauth.ms (0: sessions never expire)
    failed_delay_ms: int = 100              # connection.failed.authentication.delay.ms


class SaslSession:
    """One connection's authentication (and re-authentications)."""
    __slots__ = ("state", "kafka_frames", "server", "mechanism", "principal", "expires_ms",
                 "reauth_from", "bad_mechanism", "reauthentications")

    def __init__(self) -> None:
        self.state = HANDSHAKE_OR_VERSIONS
        self.kafka_frames = False               # tokens inside SaslAuthenticate (handshake v1)
        self.server: SaslServer | None = None
        self.mechanism: str | None = None
        self.principal: KafkaPrincipal | None = None
        self.expires_ms: int | None = None
        self.reauth_from: tuple[str, KafkaPrincipal] | None = None   # re-authenticating
        self.bad_mechanism: str | None = None
        self.reauthentications = 0      # successful ones (Kafka: successful-reauthentication-total)


def _decode(cls: Any, frame: memoryview, version: int, flexible: bool) -> tuple[Any, int]:
    header = parse_request_header(frame, flexible)
    try:
        return cls.decode(bytes(frame[header.body_offset:]), version=version), header.correlation_id
    except Exception as e:  # noqa: BLE001 — any decoder failure is the client's malformed input
        raise ProtocolViolation(f"cannot decode {cls.__name__} v{version}: {e!r}") from None


Parts = list[bytes | bytearray | memoryview]


def _encode(resp: Any, version: int, corr: int) -> Parts:
    flexible = resp.flexible_version_q(version)
    return frame_parts([response_header(corr, flexible), resp.encode(version=version)])


class SaslGate:
    """A SASL listener's `handle(conn, frame)`: authentication here, everything after it to
    `inner` (dispatch)."""

    def __init__(self, inner: Callable[[Any, memoryview], Awaitable[list[Any] | None]],
                 settings: SaslSettings) -> None:
        self.inner = inner
        self.settings = settings

    async def __call__(self, conn: Any, frame: memoryview) -> list[Any] | None:
        session = getattr(conn, "sasl", None)
        if session is None:
            session = conn.sasl = SaslSession()
        state = session.state
        if state == FAILED:
            return None                                 # closing: nothing more is read
        if state == AUTHENTICATE and not session.kafka_frames:
            return self._raw_token(conn, session, bytes(frame))
        if len(frame) < 8:
            raise ProtocolViolation(f"request of {len(frame)} bytes is shorter than a header")
        api_key, version, _corr = API_PREFIX.unpack_from(frame, 0)
        if state == COMPLETE:
            if api_key == SASL_HANDSHAKE and session.kafka_frames:
                session.reauth_from = (session.mechanism, session.principal)
                session.state = state = HANDSHAKE
            else:
                if session.expires_ms is not None and self.settings.now_ms() >= session.expires_ms:
                    raise ProtocolViolation(
                        f"the session of {session.principal} expired (KIP-368); it did not "
                        "re-authenticate")
                return await self.inner(conn, frame)
        if api_key == API_VERSIONS and state == HANDSHAKE_OR_VERSIONS:
            session.state = HANDSHAKE
            return await self.inner(conn, frame)
        if api_key == SASL_HANDSHAKE and state in (HANDSHAKE_OR_VERSIONS, HANDSHAKE):
            return self._handshake(conn, session, frame, version)
        if api_key == SASL_AUTHENTICATE and state == AUTHENTICATE:
            return self._authenticate(conn, session, frame, version)
        during = "SASL handshake" if state != AUTHENTICATE else "SASL authentication"
        raise ProtocolViolation(f"Unexpected Kafka request of type {_name(api_key)} during {during}")

    # ------------------------------------------------------------------ handshake
    def _handshake(self, conn: Any, session: SaslSession, frame: memoryview, version: int) -> Parts:
        if not HANDSHAKE_VERSIONS[0] <= version <= HANDSHAKE_VERSIONS[1]:
            raise ProtocolViolation(f"unsupported version {version} of SaslHandshake")
        req, corr = _decode(SaslHandshakeRequest, frame, version, False)
        enabled = list(self.settings.mechanisms)
        if req.mechanism not in enabled:
            self._fail(conn, session, req.mechanism, f"Unsupported SASL mechanism {req.mechanism}")
            return _encode(SaslHandshakeResponse(
                error_code=UnsupportedSaslMechanismError.errno, mechanisms=enabled), version, corr)
        if session.reauth_from is not None:
            if version < 1:
                raise ProtocolViolation("re-authentication needs SaslHandshake v1 (KIP-368)")
            if req.mechanism != session.reauth_from[0]:
                session.bad_mechanism = (
                    f"SASL mechanism '{req.mechanism}' requested by client is not supported for "
                    f"re-authentication of mechanism '{session.reauth_from[0]}'")
        session.kafka_frames = version >= 1
        session.mechanism = req.mechanism
        session.server = new_server(req.mechanism, self.settings.credentials, self.settings.now_ms)
        session.server.reauthenticating = session.reauth_from is not None
        session.state = AUTHENTICATE
        return _encode(SaslHandshakeResponse(error_code=0, mechanisms=enabled), version, corr)

    # ------------------------------------------------------------------ tokens
    def _authenticate(self, conn: Any, session: SaslSession, frame: memoryview, version: int
                      ) -> Parts:
        lo, hi = AUTHENTICATE_VERSIONS
        if not lo <= version <= hi:
            raise ProtocolViolation(f"unsupported version {version} of SaslAuthenticate")
        req, corr = _decode(SaslAuthenticateRequest, frame, version, version >= 2)
        try:
            if session.bad_mechanism is not None:
                raise SaslAuthenticationFailed(session.bad_mechanism)
            challenge = self._evaluate(conn, session, bytes(req.auth_bytes))
        except SaslAuthenticationFailed as e:
            self._fail(conn, session, session.mechanism, str(e))
            return _encode(SaslAuthenticateResponse(
                error_code=SaslAuthenticationFailedError.errno, error_message=str(e),
                auth_bytes=b"", session_lifetime_ms=0), version, corr)
        assert session.server is not None, "the exchange succeeded: the server is still there"
        lifetime = self._complete(conn, session) if session.server.complete else 0
        return _encode(SaslAuthenticateResponse(error_code=0, error_message=None,
                                                auth_bytes=challenge,
                                                session_lifetime_ms=lifetime), version, corr)

    def _raw_token(self, conn: Any, session: SaslSession, token: bytes) -> Parts | None:
        """KIP-43 v0: a bare token in, a bare challenge out; a failure just closes."""
        try:
            challenge = self._evaluate(conn, session, token)
        except SaslAuthenticationFailed as e:
            self._fail(conn, session, session.mechanism, str(e))
            return None
        assert session.server is not None, "the exchange succeeded: the server is still there"
        if session.server.complete:
            self._complete(conn, session)
        return frame_parts([challenge])     # an empty one too, as Kafka's server sends it

    def _evaluate(self, conn: Any, session: SaslSession, token: bytes) -> bytes:
        server = session.server
        assert server is not None, "state AUTHENTICATE: the handshake made the server"
        challenge = server.evaluate(token)
        if server.complete and session.reauth_from is not None:
            before = session.reauth_from[1]
            after = KafkaPrincipal("User", server.principal_name or "")
            if after != before:
                raise SaslAuthenticationFailed(
                    "Cannot change principals during re-authentication from "
                    f"{before.principal_type}.{before.name}: {after.principal_type}.{after.name}")
        return challenge

    def _complete(self, conn: Any, session: SaslSession) -> int:
        """The exchange succeeded: set the principal; returns the session lifetime (ms, 0: none)."""
        server = session.server
        assert server is not None, "state AUTHENTICATE: the handshake made the server"
        principal = KafkaPrincipal("User", server.principal_name or "")
        now = self.settings.now_ms()
        limits = [self.settings.max_reauth_ms] if self.settings.max_reauth_ms > 0 else []
        if server.lifetime_ms is not None:
            limits.append(server.lifetime_ms - now)
        lifetime = max(0, min(limits)) if limits else 0
        session.expires_ms = now + lifetime if limits else None
        what = "authenticated"
        if session.reauth_from is not None:
            what = "re-authenticated"
            session.reauthentications += 1
        log.debug("%s: %s %s with SASL mechanism %s from %s; session lifetime %d ms",
                  conn.name, what, principal, session.mechanism, conn.peer, lifetime)
        session.principal = conn.principal = principal
        session.state = COMPLETE
        session.server = None
        session.reauth_from = None
        return lifetime

    def _fail(self, conn: Any, session: SaslSession, mechanism: str | None, message: str) -> None:
        """Log (the user, never a password), then close once the error response is out."""
        server = session.server
        who = f"User:{server.principal_name}" if server and server.principal_name else "unknown user"
        what = "re-authentication" if session.reauth_from is not None else "authentication"
        log.warning("%s: failed %s of %s with SASL mechanism %s from %s: %s", conn.name, what,
                    who, mechanism, conn.peer, message)
        session.state = FAILED
        session.server = None
        delay_s = self.settings.failed_delay_ms / 1000
        conn.loop.call_later(delay_s, _close_when_written, conn, f"failed {what}")


def _close_when_written(conn: Any, reason: str) -> None:
    if conn.pending and not conn.closed:
        conn.loop.call_later(0.01, _close_when_written, conn, reason)
        return
    conn.close(reason, logging.INFO)


def _name(api_key: int) -> str:
    """Kafka's ApiKeys name (METADATA, OFFSET_COMMIT), for the close's log line."""
    try:
        return re.sub(r"(?<!^)(?=[A-Z])", "_", ApiKey(api_key).name).upper()
    except ValueError:
        return str(api_key)
