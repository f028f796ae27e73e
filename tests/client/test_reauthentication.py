"""KIP-368 in the reference client: a connection re-authenticates on itself before the broker's
session lifetime (connections.max.reauth.ms) ends, between requests, at a seeded random point of
[85%, 95%] of it; a refused re-authentication (a deleted SCRAM credential) fails the client with
the broker's SASL error while other users' clients go on. Real sockets, an in-process cluster
with a SASL listener, on virtual time (tests/conftest.py)."""
from __future__ import annotations

import asyncio
import random
import struct

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from cluster_helpers import wait_until
from minibroker.client import Admin, Consumer, Producer
from minibroker.client.security import from_properties
from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection
from minibroker.network.sasl_client import AuthenticationFailed, SessionReauth, authenticate
from minibroker.protocol.framing import frame_parts, response_header

LIFETIME_MS = 20_000
SASL = dict(brokers=1, listeners="SASL_PLAINTEXT://127.0.0.1:0",
            users=("alice:alice-secret", "bob:bob-secret"), connections_max_reauth_ms=LIFETIME_MS,
            group_initial_rebalance_delay_ms=0)
REFUSED = ("Authentication failed during re-authentication due to invalid credentials with SASL "
           "mechanism SCRAM-SHA-256")


def scram(user: str):
    return from_properties({"security.protocol": "SASL_PLAINTEXT",
                            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
                            "sasl.password": f"{user}-secret"})


def sasl_connections(cluster) -> set:
    """The broker's open connections on the SASL listener (its sessions are `conn.sasl`)."""
    return {c for c in cluster.brokers[1].connections
            if c.listener == "SASL_PLAINTEXT" and not c.closed}


# ---------------------------------------------------------------------- the schedule
def test_reauthentication_is_due_in_the_kip368_window_drawn_from_the_seeded_rng():
    now = [100.0]
    draws = []
    for seed in range(300):
        reauth = SessionReauth(authenticate, lambda: now[0], random.Random(seed))
        reauth.schedule(10_000)
        draws.append(reauth.at - now[0])
    assert all(8.5 <= d <= 9.5 for d in draws)
    assert min(draws) < 8.6 and max(draws) > 9.4         # the whole 10% window is used
    again = SessionReauth(authenticate, lambda: now[0], random.Random(7))
    again.schedule(10_000)
    assert again.at - now[0] == draws[7]                  # the same seed, the same point
    assert not again.due()
    now[0] = again.at
    assert again.due()
    again.schedule(0)                                     # a session without lifetime
    now[0] += 10 ** 9
    assert again.at is None and not again.due()


# ---------------------------------------------------------------------- the wire order
class ScriptedBroker:
    """A listener answering by hand: each request's (api key, correlation id) in a queue."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue = asyncio.Queue()
        self.writer: asyncio.StreamWriter | None = None
        self.eof = asyncio.Event()

    async def start(self) -> tuple[str, int]:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[:2]

    async def _serve(self, reader, writer) -> None:
        self.writer = writer
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
                api_key, _version, corr = struct.unpack_from(">hhi", frame)
                self.requests.put_nowait((api_key, corr))
        except asyncio.IncompleteReadError:
            self.eof.set()

    async def stop(self, conn: KafkaClientConnection) -> None:
        conn.close()
        await asyncio.wait_for(self.eof.wait(), 10)     # the client's close reached us
        self.server.close()
        await self.server.wait_closed()

    async def next(self) -> tuple[int, int]:
        return await asyncio.wait_for(self.requests.get(), 10)

    def answer(self, corr: int, resp, version: int) -> None:
        assert self.writer is not None
        flexible = resp.flexible_version_q(version) and resp.API_KEY != 18
        self.writer.writelines(frame_parts([response_header(corr, flexible),
                                            resp.encode(version=version)]))


def versions_ok():
    return ApiVersionsResponse(error_code=0, api_keys=[])


async def _reauth_is_due(broker: ScriptedBroker):
    """A connection with a PLAIN session that is due to re-authenticate, one request (A) in
    flight and one (B) sent after: returns (conn, reauth, A's future, A's id, B's future)."""
    host, port = await broker.start()
    conn = await KafkaClientConnection.connect(host, port, "t")
    conn.reauth = reauth = SessionReauth(
        lambda c: authenticate(c, "PLAIN", "alice", "alice-secret"),
        asyncio.get_running_loop().time, random.Random(1))
    reauth.schedule(1000)
    a = conn.send(ApiVersionsRequest(), 0)
    api_key, a_corr = await broker.next()
    assert api_key == 18
    await asyncio.sleep(1)                      # virtual time: past 95% of the lifetime
    b = conn.send(ApiVersionsRequest(), 0)
    assert [entry[0] for entry in conn.inflight] == [a_corr]    # B waits, A is owed
    return conn, reauth, a, a_corr, b


async def test_reauthentication_runs_alone_between_requests():
    broker = ScriptedBroker()
    conn, reauth, a, a_corr, b = await _reauth_is_due(broker)
    broker.answer(a_corr, versions_ok(), 0)
    assert (await a).error_code == 0
    api_key, corr = await broker.next()         # after A's response: the handshake, not B
    assert api_key == 17
    broker.answer(corr, SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"]), 1)
    api_key, corr = await broker.next()
    assert api_key == 36
    assert not b.done() and len(conn.inflight) == 1         # the exchange only
    broker.answer(corr, SaslAuthenticateResponse(
        error_code=0, error_message=None, auth_bytes=b"", session_lifetime_ms=5000), 2)
    api_key, b_corr = await broker.next()       # then B goes out
    assert api_key == 18
    broker.answer(b_corr, versions_ok(), 0)
    assert (await b).error_code == 0
    now = asyncio.get_running_loop().time()
    assert reauth.count == 1 and now + 4.25 <= reauth.at <= now + 4.75
    await broker.stop(conn)


async def test_a_refused_reauthentication_fails_the_waiting_requests_and_closes():
    broker = ScriptedBroker()
    conn, reauth, a, a_corr, b = await _reauth_is_due(broker)
    broker.answer(a_corr, versions_ok(), 0)
    await a
    _, corr = await broker.next()
    broker.answer(corr, SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN"]), 1)
    _, corr = await broker.next()
    broker.answer(corr, SaslAuthenticateResponse(
        error_code=58, error_message="Authentication failed: Invalid username or password",
        auth_bytes=b"", session_lifetime_ms=0), 2)
    with pytest.raises(AuthenticationFailed, match="Invalid username or password"):
        await b
    assert conn.closed and "re-authentication failed" in conn.close_reason
    with pytest.raises(ConnectionError):
        await conn.send(ApiVersionsRequest(), 0)
    await broker.stop(conn)


# ---------------------------------------------------------------------- against the broker
async def test_clients_keep_one_connection_over_several_session_lifetimes():
    lifetimes = 5
    async with Cluster(**SASL) as c:
        await c.create_topic("t", partitions=1, replication_factor=1)
        async with Producer(c.bootstrap, security=scram("alice"), rng=random.Random(3)) as p:
            await p.send("t", b"0")
            conns, conn = sasl_connections(c), p.pool.connected(1)
            for i in range(1, 4 * lifetimes):           # a record every quarter lifetime
                await asyncio.sleep(LIFETIME_MS / 4000)
                await p.send("t", b"%d" % i)
            # The broker saw re-authentications on the same connections, none opened or closed.
            assert sasl_connections(c) == conns
            assert sum(s.sasl.reauthentications for s in conns) >= lifetimes - 1
            assert p.pool.connected(1) is conn and conn.reauth.count >= lifetimes - 1
        consumer = Consumer(c.bootstrap, group_id="g", auto_offset_reset="earliest",
                            security=scram("bob"), rng=random.Random(4))
        try:
            consumer.subscribe(["t"])
            got = []
            for _ in range(60):
                got += [r.value for r in await consumer.poll(1.0)]
                if len(got) >= 4 * lifetimes:
                    break
            assert got == [b"%d" % i for i in range(4 * lifetimes)]
            conn = consumer.pool.connected(1)
            before = {s: s.sasl.reauthentications for s in sasl_connections(c)}
            end = asyncio.get_running_loop().time() + lifetimes * LIFETIME_MS / 1000
            while asyncio.get_running_loop().time() < end:   # long-poll fetches, heartbeats
                assert await consumer.poll(1.0) == []
            after = {s: s.sasl.reauthentications for s in sasl_connections(c)}
            assert after.keys() == before.keys()
            assert sum(after.values()) - sum(before.values()) >= lifetimes - 1
            assert consumer.pool.connected(1) is conn and conn.reauth.count >= lifetimes - 1
        finally:
            await consumer.close()


async def test_a_deleted_credential_fails_its_clients_at_reauthentication():
    async with Cluster(**SASL) as c:
        await c.create_topic("t", partitions=1, replication_factor=1)
        alice = Producer(c.bootstrap, security=scram("alice"))
        alice_admin = Admin(c.bootstrap, security=scram("alice"))
        bob = Producer(c.bootstrap, security=scram("bob"))
        async with alice, alice_admin, bob, Admin(c.bootstrap, security=scram("bob")) as bob_admin:
            await alice.send("t", b"a0")
            assert "t" in await alice_admin.list_topics()
            await bob.send("t", b"b0")
            bob_conn = bob.pool.connected(1)
            await bob_admin.alter_user_scram_credentials(deletions=[("alice", "SCRAM-SHA-256")])
            await wait_until(lambda: c.brokers[1].credentials.get_scram(
                "alice", "SCRAM-SHA-256") is None, what="the broker to learn the deletion")
            await alice.send("t", b"a1")            # the open session goes on until it ends
            await asyncio.sleep(LIFETIME_MS / 1000)
            with pytest.raises(AuthenticationFailed, match=REFUSED):
                await alice.send("t", b"a2")        # held for the re-authentication it failed
            with pytest.raises(AuthenticationFailed, match="invalid credentials"):
                await alice.send("t", b"a3")        # the reconnect is refused too: not retried
            with pytest.raises(AuthenticationFailed, match=REFUSED):
                await alice_admin.list_topics()
            for i in range(1, 9):                   # bob goes on over four more lifetimes
                await bob.send("t", b"b%d" % i)
                await asyncio.sleep(LIFETIME_MS / 2000)
            assert bob.pool.connected(1) is bob_conn and bob_conn.reauth.count >= 3
            assert "t" in await bob_admin.list_topics()
