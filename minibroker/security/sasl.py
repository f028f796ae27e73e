"""SASL server mechanisms, sans-IO: PLAIN, SCRAM-SHA-256/512 (scramp) and OAUTHBEARER (Kafka's
unsecured JWS validator). Each takes the client's tokens one at a time and answers the next
challenge; network/sasl.py carries the tokens (KIP-43 framing, SaslAuthenticate).

A failure raises SaslAuthenticationFailed with the message Kafka's server sends: a mechanism's
own message where Kafka's throws SaslAuthenticationException (PLAIN, OAUTHBEARER), else the
generic one that never tells whether the user exists (SCRAM).
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import re

from scramp import ScramMechanism
from scramp.core import Nonce
from scramp.utils import ScramException

from minibroker.security.credentials import SCRAM_MECHANISMS, CredentialStore

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


class SaslAuthenticationFailed(Exception):
    """Authentication failed: str(e) is what the client is told."""


def generic_failure(mechanism: str, reauthenticating: bool = False) -> SaslAuthenticationFailed:
    what = "re-authentication" if reauthenticating else "authentication"
    return SaslAuthenticationFailed(f"Authentication failed during {what} due to invalid "
                                    f"credentials with SASL mechanism {mechanism}")


class SaslServer:
    mechanism = ""

    def __init__(self) -> None:
        self.complete = False
        self.principal_name: str | None = None   # the user, once known (also for failure logs)
        self.lifetime_ms: int | None = None      # the credential's expiry (wall clock), if any
        self.reauthenticating = False            # KIP-368: named in the failure message

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


class PlainServer(SaslServer):
    """RFC 4616: [authzid] NUL authcid NUL passwd."""
    mechanism = "PLAIN"

    def __init__(self, credentials: CredentialStore) -> None:
        super().__init__()
        self.credentials = credentials

    def evaluate(self, token: bytes) -> bytes:
        parts = token.decode("utf-8", "replace").split("\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailed(
                f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, user, password = parts
        self.principal_name = user or None
        if not user:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        if not self.credentials.check_plain(user, password):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationFailed("Authentication failed: Client requested an "
                                           "authorization id that is different from username")
        self.complete = True
        return b""


class ScramServer(SaslServer):
    """RFC 5802 through scramp: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, credentials: CredentialStore) -> None:
        super().__init__()
        assert mechanism in SCRAM_MECHANISMS
        self.mechanism = mechanism
        self.credentials = credentials
        self._server = ScramMechanism(mechanism).make_server(self._auth_info)
        self._step = 0

    def _auth_info(self, user: str):
        self.principal_name = user
        cred = self.credentials.get_scram(user, self.mechanism)
        if cred is None:
            raise KeyError(user)
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations

    def evaluate(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
            if self._step == 0:
                self._step = 1
                self._server.set_client_first(text)
                return self._server.get_server_first().encode()
            if self._step == 1:
                self._step = 2
                self._accept_longer_nonce(text)
                self._server.set_client_final(text)
                final = self._server.get_server_final().encode()
                self.complete = True
                return final
        except (ScramException, UnicodeDecodeError, ValueError, KeyError):
            pass
        except Exception:  # noqa: BLE001 — scramp's parser on hostile input: still a failure
            pass
        raise generic_failure(self.mechanism, self.reauthenticating)

    def _accept_longer_nonce(self, client_final: str) -> None:
        """Kafka's server accepts a client-final nonce that only ends with the server's
        (ScramSaslServer: endsWith); librdkafka before 2.1 sends its own nonce in front again.
        The proof is still checked over the messages as sent."""
        nonce = next((kv[2:] for kv in client_final.split(",") if kv.startswith("r=")), None)
        expected = str(self._server.nonce)
        if nonce and nonce != expected and nonce.endswith(expected):
            self._server.nonce = Nonce(nonce)


# ---------------------------------------------------------------------- OAUTHBEARER
_KVPAIRS = re.compile(r"^(?:[A-Za-z]+=[\x21-\x7E \t\r\n]*\x01)*\x01$")   # kvpair* kvsep
_AUTH = re.compile(r"^[Bb]earer +([-_.a-zA-Z0-9]+)$")


# Kafka's unsecuredValidatorAllowableClockSkewMs (a JAAS option, default 0). Here 30 s: tokens
# are minted on the client's wall clock, and the cluster's clock is its own (virtual in tests).
ALLOWABLE_CLOCK_SKEW_MS = 30_000


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


class OAuthBearerServer(SaslServer):
    """RFC 7628's client initial response `n,[a=authzid],\\x01auth=Bearer <jwt>\\x01...\\x01`,
    validated as Kafka's OAuthBearerUnsecuredValidatorCallbackHandler does: alg "none", the
    principal in `sub`, `exp` required and in the future, `iat` (if present) not in the future
    and before `exp`. A bad token gets the JSON error challenge; the client's %x01 answer then
    fails the exchange with it (RFC 7628 3.2.3)."""
    mechanism = "OAUTHBEARER"

    def __init__(self, now_ms, principal_claim: str = "sub") -> None:
        super().__init__()
        self.now_ms = now_ms
        self.principal_claim = principal_claim
        self._error: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if token == b"\x01" and self._error is not None:
            raise SaslAuthenticationFailed(self._error)
        self._error = None
        text = token.decode("utf-8", "replace")
        gs2, sep, kvpairs = text.partition(",\x01")
        m = re.fullmatch(r"n,(?:a=([^,]*))?", gs2)
        if not sep or m is None or not _KVPAIRS.match(kvpairs):
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message")
        fields = dict(kv.split("=", 1) for kv in kvpairs.split("\x01") if kv)
        auth = _AUTH.match(fields.get("auth", ""))
        if auth is None:
            raise SaslAuthenticationFailed("Invalid OAUTHBEARER client first message")
        problem = self._validate(auth.group(1))
        if problem is not None:
            self._error = json.dumps({"status": "invalid_token"}, separators=(",", ":"))
            return self._error.encode()
        authzid = m.group(1)
        if authzid and authzid != self.principal_name:
            raise SaslAuthenticationFailed(
                f"Authentication failed: Client requested an authorization id ({authzid}) that "
                f"is different from the token's principal name ({self.principal_name})")
        self.complete = True
        return b""

    def _validate(self, jwt: str) -> str | None:
        """None, or why the token is refused (logged by the caller, never sent)."""
        parts = jwt.split(".")
        if len(parts) != 3 or parts[2]:
            return "not an unsecured JWS (header.payload. with an empty signature)"
        try:
            header = json.loads(_b64url(parts[0]))
            claims = json.loads(_b64url(parts[1]))
        except (binascii.Error, ValueError):
            return "header or payload is not base64url JSON"
        if not isinstance(header, dict) or header.get("alg") != "none":
            return "the header's alg is not \"none\""
        if not isinstance(claims, dict):
            return "the payload is not a JSON object"
        sub = claims.get(self.principal_claim)
        if not isinstance(sub, str) or not sub.strip():
            return f"Required claim missing: {self.principal_claim}"
        now_s = self.now_ms() / 1000
        skew = ALLOWABLE_CLOCK_SKEW_MS / 1000
        exp, iat = claims.get("exp"), claims.get("iat")
        if not _number(exp):
            return "Required claim missing: exp"
        if iat is not None and not _number(iat):
            return "The iat claim had the incorrect type"
        if now_s >= exp + skew:
            return f"The indicated time ({now_s} seconds) is at or after the Expiration Time"
        if iat is not None and iat > now_s + skew:
            return "The Issued At value is after the indicated time"
        if iat is not None and exp <= iat:
            return "The Expiration Time time was not after the Issued At time"
        self.principal_name = sub
        self.lifetime_ms = int(exp * 1000)
        return None


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def new_server(mechanism: str, credentials: CredentialStore, now_ms) -> SaslServer:
    """A server for one exchange. `now_ms`: the cluster's wall clock (token expiry)."""
    if mechanism == "PLAIN":
        return PlainServer(credentials)
    if mechanism in SCRAM_MECHANISMS:
        return ScramServer(mechanism, credentials)
    if mechanism == "OAUTHBEARER":
        return OAuthBearerServer(now_ms)
    raise ValueError(f"unknown SASL mechanism {mechanism}")
