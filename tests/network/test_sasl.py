"""SASL authentication on a SASL_PLAINTEXT listener (network/sasl.py), over loopback sockets:
KIP-43 handshake v0 (bare tokens) and v1 (SaslAuthenticate), each mechanism, Kafka's failures
and messages, the connection state before authentication, and KIP-368 session lifetimes."""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
import struct

import pytest
from kafka.protocol.metadata import (
    ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse)
from scramp import ScramClient

from minibroker.cluster import Cluster
from minibroker.network.client import encode_request
from minibroker.security.credentials import store_for_users
from minibroker.security.principal import KafkaPrincipal
from minibroker.security.sasl import SaslAuthenticationFailed, new_server

SASL = dict(brokers=1, listeners="SASL_PLAINTEXT://127.0.0.1:0",
            users=("alice:alice-secret", "bob:bob-secret"))


class Raw:
    """A hand-driven client connection: frames in, frames out."""

    def __init__(self, reader, writer) -> None:
        self.reader, self.writer, self.corr = reader, writer, 0

    @classmethod
    async def open(cls, cluster) -> "Raw":
        b = cluster.brokers[1]
        return cls(*await asyncio.open_connection(b.host, b.port))

    async def frame(self) -> bytes:
        size = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))[0]
        return await self.reader.readexactly(size)

    async def request(self, req, version: int, resp_cls):
        self.corr += 1
        self.writer.write(b"".join(bytes(p) for p in encode_request(req, version, self.corr, "t")))
        data = await self.frame()
        assert struct.unpack(">i", data[:4])[0] == self.corr
        flexible = resp_cls.flexible_version_q(version) and resp_cls.API_KEY != 18
        return resp_cls.decode(data[5 if flexible else 4:], version=version)

    async def token(self, data: bytes) -> bytes:
        self.writer.write(struct.pack(">i", len(data)) + data)
        return await self.frame()

    async def authenticate(self, token: bytes, version: int = 2):
        return await self.request(SaslAuthenticateRequest(auth_bytes=token), version,
                                  SaslAuthenticateResponse)

    async def handshake(self, mechanism: str, version: int = 1):
        return await self.request(SaslHandshakeRequest(mechanism=mechanism), version,
                                  SaslHandshakeResponse)

    async def closed(self) -> bool:
        return await asyncio.wait_for(self.reader.read(), 10) == b""


def server_conn(cluster):
    (conn,) = [c for c in cluster.brokers[1].connections if c.listener == "SASL_PLAINTEXT"]
    return conn


def metadata():
    return MetadataRequest(topics=[], allow_auto_topic_creation=False)


async def test_plain_over_saslauthenticate_sets_the_principal_and_serves_requests():
    async with Cluster(**SASL) as c:
        raw = await Raw.open(c)
        versions = await raw.request(ApiVersionsRequest(), 0, ApiVersionsResponse)
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert keys[17] == (0, 1) and keys[36] == (0, 2)
        hs = await raw.handshake("PLAIN")
        assert (hs.error_code, hs.mechanisms) == (
            0, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
        resp = await raw.authenticate(b"\0alice\0alice-secret")
        assert (resp.error_code, resp.error_message, resp.auth_bytes,
                resp.session_lifetime_ms) == (0, None, b"", 0)
        assert server_conn(c).principal == KafkaPrincipal("User", "alice")
        md = await raw.request(metadata(), 1, MetadataResponse)
        assert [b.node_id for b in md.brokers] == [1]


async def test_handshake_v0_carries_bare_tokens():
    async with Cluster(**SASL) as c:
        raw = await Raw.open(c)
        assert (await raw.handshake("PLAIN", version=0)).error_code == 0
        assert await raw.token(b"\0bob\0bob-secret") == b""        # Kafka sends the empty token
        assert server_conn(c).principal == KafkaPrincipal("User", "bob")


async def test_scram_over_handshake_v0_and_v1():
    async with Cluster(**SASL) as c:
        for mech, version in (("SCRAM-SHA-256", 1), ("SCRAM-SHA-512", 0)):
            raw = await Raw.open(c)
            assert (await raw.handshake(mech, version)).error_code == 0
            client = ScramClient([mech], "alice", "alice-secret")
            if version:
                first = await raw.authenticate(client.get_client_first().encode())
                client.set_server_first(first.auth_bytes.decode())
                final = await raw.authenticate(client.get_client_final().encode())
                assert final.error_code == 0
                client.set_server_final(final.auth_bytes.decode())      # the server's proof
            else:
                client.set_server_first((await raw.token(client.get_client_first().encode())
                                         ).decode())
                client.set_server_final((await raw.token(client.get_client_final().encode())
                                         ).decode())
            raw.writer.close()


async def test_wrong_password_gets_kafkas_error_then_the_close(caplog):
    caplog.set_level(logging.INFO, "minibroker.network.sasl")
    async with Cluster(**SASL) as c:
        raw = await Raw.open(c)
        await raw.handshake("PLAIN")
        resp = await raw.authenticate(b"\0alice\0wrong-password")
        assert (resp.error_code, resp.error_message) == (
            58, "Authentication failed: Invalid username or password")
        assert await raw.closed()
        raw = await Raw.open(c)
        await raw.handshake("SCRAM-SHA-256")
        client = ScramClient(["SCRAM-SHA-256"], "alice", "not-it")
        first = await raw.authenticate(client.get_client_first().encode())
        client.set_server_first(first.auth_bytes.decode())
        resp = await raw.authenticate(client.get_client_final().encode())
        assert (resp.error_code, resp.error_message) == (
            58, "Authentication failed during authentication due to invalid credentials with "
                "SASL mechanism SCRAM-SHA-256")
        assert await raw.closed()
    lines = [r.getMessage() for r in caplog.records if "failed authentication" in r.getMessage()]
    assert len(lines) == 2
    assert "User:alice with SASL mechanism PLAIN" in lines[0]
    assert "User:alice with SASL mechanism SCRAM-SHA-256" in lines[1]
    assert not any("wrong-password" in r.getMessage() or "not-it" in r.getMessage()
                   for r in caplog.records)


async def test_unknown_user_and_unsupported_mechanism():
    async with Cluster(**SASL, sasl_enabled_mechanisms="SCRAM-SHA-512") as c:
        raw = await Raw.open(c)
        hs = await raw.handshake("PLAIN")
        assert (hs.error_code, hs.mechanisms) == (33, ["SCRAM-SHA-512"])
        assert await raw.closed()
        raw = await Raw.open(c)
        await raw.handshake("SCRAM-SHA-512")
        client = ScramClient(["SCRAM-SHA-512"], "mallory", "x")
        resp = await raw.authenticate(client.get_client_first().encode())
        assert resp.error_code == 58 and "SCRAM-SHA-512" in resp.error_message
        assert await raw.closed()


async def test_requests_before_authentication_close_the_connection(caplog):
    async with Cluster(**SASL) as c:
        raw = await Raw.open(c)
        raw.writer.write(b"".join(bytes(p) for p in encode_request(metadata(), 1, 1, "t")))
        assert await raw.closed()
        raw = await Raw.open(c)                 # after the handshake, still only SASL tokens
        await raw.handshake("PLAIN")
        raw.writer.write(b"".join(bytes(p) for p in encode_request(metadata(), 1, 1, "t")))
        assert await raw.closed()
        assert "Unexpected Kafka request of type METADATA during SASL authentication" in \
            caplog.text
        assert "Unexpected Kafka request of type METADATA during SASL handshake" in caplog.text


def _jwt(claims: dict) -> bytes:
    def part(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return part({"alg": "none"}) + "." + part(claims) + "."


async def test_oauthbearer_unsecured_tokens():
    async with Cluster(**SASL) as c:
        now = c.clock.now_ms() / 1000
        raw = await Raw.open(c)
        await raw.handshake("OAUTHBEARER")
        good = f"n,,\x01auth=Bearer {_jwt({'sub': 'carol', 'exp': now + 60, 'iat': now})}\x01\x01"
        resp = await raw.authenticate(good.encode())
        assert resp.error_code == 0
        assert 0 < resp.session_lifetime_ms <= 60_000          # the token's expiry (KIP-368)
        assert server_conn(c).principal == KafkaPrincipal("User", "carol")
        raw.writer.close()
        await asyncio.sleep(0.1)
        raw = await Raw.open(c)
        await raw.handshake("OAUTHBEARER")
        expired = f"n,,\x01auth=Bearer {_jwt({'sub': 'carol', 'exp': now - 60})}\x01\x01"
        resp = await raw.authenticate(expired.encode())
        assert (resp.error_code, resp.auth_bytes) == (0, b'{"status":"invalid_token"}')
        resp = await raw.authenticate(b"\x01")
        assert (resp.error_code, resp.error_message) == (58, '{"status":"invalid_token"}')
        assert await raw.closed()


async def test_session_lifetime_and_reauthentication():
    async with Cluster(**SASL, connections_max_reauth_ms=1000) as c:
        raw = await Raw.open(c)
        await raw.handshake("PLAIN")
        assert (await raw.authenticate(b"\0alice\0alice-secret")).session_lifetime_ms == 1000
        await asyncio.sleep(0.5)
        await raw.request(metadata(), 1, MetadataResponse)
        # Re-authenticating renews the session; another principal is refused.
        await raw.handshake("PLAIN")
        assert (await raw.authenticate(b"\0alice\0alice-secret", 1)).session_lifetime_ms == 1000
        await asyncio.sleep(0.8)
        await raw.request(metadata(), 1, MetadataResponse)        # 1.3 s after the first
        await raw.handshake("PLAIN")
        resp = await raw.authenticate(b"\0bob\0bob-secret", 1)
        assert (resp.error_code, resp.error_message) == (
            58, "Cannot change principals during re-authentication from User.alice: User.bob")
        assert await raw.closed()
        # Past its lifetime, anything but re-authentication closes the connection.
        raw = await Raw.open(c)
        await raw.handshake("PLAIN")
        await raw.authenticate(b"\0alice\0alice-secret")
        await asyncio.sleep(1.1)
        raw.writer.write(b"".join(bytes(p) for p in encode_request(metadata(), 1, 9, "t")))
        assert await raw.closed()


async def _scram(raw: Raw, user: str, mech: str = "SCRAM-SHA-512"):
    """A SCRAM exchange over SaslAuthenticate v2; the last response."""
    assert (await raw.handshake(mech)).error_code == 0
    client = ScramClient([mech], user, f"{user}-secret")
    first = await raw.authenticate(client.get_client_first().encode())
    if first.error_code:
        return first
    client.set_server_first(first.auth_bytes.decode())
    return await raw.authenticate(client.get_client_final().encode())


async def test_reauthentication_keeps_the_mechanism_and_the_principal():
    """KIP-368 on the broker: a second SaslHandshake (v1) on an authenticated connection starts
    re-authentication, also once the session has ended; another mechanism, another principal
    or handshake v0 (no SaslAuthenticate to carry the lifetime) are refused."""
    async with Cluster(**SASL, connections_max_reauth_ms=1000) as c:
        raw = await Raw.open(c)
        assert (await _scram(raw, "alice")).session_lifetime_ms == 1000
        await asyncio.sleep(1.5)                # past the session's end
        resp = await _scram(raw, "alice")
        assert (resp.error_code, resp.session_lifetime_ms) == (0, 1000)
        assert (await raw.request(metadata(), 1, MetadataResponse)).brokers
        assert server_conn(c).sasl.reauthentications == 1
        resp = await _scram(raw, "bob")
        assert (resp.error_code, resp.error_message) == (
            58, "Cannot change principals during re-authentication from User.alice: User.bob")
        assert await raw.closed()
        raw = await Raw.open(c)
        await _scram(raw, "alice")
        assert (await raw.handshake("PLAIN")).error_code == 0
        resp = await raw.authenticate(b"\0alice\0alice-secret")
        assert (resp.error_code, resp.error_message) == (
            58, "SASL mechanism 'PLAIN' requested by client is not supported for "
                "re-authentication of mechanism 'SCRAM-SHA-512'")
        assert await raw.closed()
        raw = await Raw.open(c)
        await _scram(raw, "alice")
        raw.writer.write(b"".join(bytes(p) for p in encode_request(
            SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 0, 9, "t")))
        assert await raw.closed()


async def test_sasl_requests_on_a_plaintext_listener_are_illegal_state():
    async with Cluster(brokers=1) as c:
        raw = await Raw.open(c)
        assert (await raw.handshake("PLAIN")).error_code == 34
        resp = await raw.authenticate(b"\0alice\0x")
        assert (resp.error_code, resp.error_message) == (
            34, "SaslAuthenticate request received after successful authentication")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
def test_hostile_tokens_fail_cleanly(mechanism):
    """Random and truncated tokens: every one is a SaslAuthenticationFailed (Kafka's error and
    the close), never another exception."""
    rng = random.Random(41)
    store = store_for_users(["alice:alice-secret"], random.Random(0))
    seeds = [b"n,,n=alice,r=abc", b"c=biws,r=abc,p=AAAA", b"n,,\x01auth=Bearer a.b.\x01\x01",
             b"\0alice\0", b"n,a=x,\x01auth=Bearer e30.e30.\x01\x01"]
    for _ in range(300):
        base = rng.choice(seeds)
        token = bytes(rng.getrandbits(8) for _ in range(rng.randrange(40))) if rng.random() < 0.5 \
            else base[:rng.randrange(len(base) + 1)]
        server = new_server(mechanism, store, lambda: 1_700_000_000_000)
        for t in (token, token):
            try:
                server.evaluate(t)
            except SaslAuthenticationFailed:
                break
