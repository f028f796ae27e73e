"""`serve --processes` with a secured client listener (issue 41): the brokers replicate over a
SASL_PLAINTEXT listener of their own (Kafka's inter.broker.listener.name, here BROKER) that only
the cluster user passes, with the password serve generates. In one process over loopback TCP,
with the configs serve builds and a password the test knows; tests/test_serve_processes_security.py
runs it as serve does, one broker per process."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import TopicAuthorizationFailedError
from kafka.protocol.metadata import MetadataRequest

from cluster_helpers import FETCH_VERSION, batch, fetch_request, log_bytes, produce_request
from minibroker.broker.listener_security import CONTROL_PLANE_USER
from minibroker.cli.serve_security import INTER_BROKER_LISTENER, inter_broker_overrides
from minibroker.cluster import Cluster
from minibroker.config import ClusterConfig
from minibroker.network.client import KafkaClientConnection
from minibroker.network.sasl_client import AuthenticationFailed, scram_authenticate
from minibroker.security.principal import KafkaPrincipal
from tests.broker.test_control_plane import attacks, raw
from tests.security.acl_helpers import STANDARD

pytestmark = pytest.mark.timeout(90)

PASSWORD = "generated-at-start"


def config() -> ClusterConfig:
    """What `serve --processes --security-protocol SASL_PLAINTEXT --user ... --acls` builds, with
    the brokers on loopback sockets in this process."""
    base = ClusterConfig(brokers=3, minibroker_inter_broker_sockets=True,
                         minibroker_control_plane_password=PASSWORD,
                         listeners="SASL_PLAINTEXT://127.0.0.1:0",
                         users=("alice:alice-secret", "mallory:mallory-secret"),
                         authorizer_class_name=STANDARD, super_users="User:alice")
    return base.with_overrides(**inter_broker_overrides(base))


def port_of(broker, name: str) -> int:
    (spec,) = [s for s in broker.listeners if s.name == name]
    return spec.port


async def login(host: str, port: int, user: str, password: str) -> KafkaClientConnection:
    conn = await KafkaClientConnection.connect(host, port)
    await scram_authenticate(conn, user, password, "SCRAM-SHA-512")
    return conn


def replica_fetch(replica_id: int):
    req = fetch_request("t", 0, 0)
    req.replica_id = replica_id
    return req


async def test_followers_replicate_over_the_cluster_listener_as_the_cluster_user():
    async with Cluster(config()) as c:
        await c.create_topic("t", 1, 3)
        leader = await c.leader_of("t", 0)
        b = c.brokers[leader]
        assert b.inter_broker_listener == b.cluster_listener == INTER_BROKER_LISTENER
        alice = await login(b.host, port_of(b, "SASL_PLAINTEXT"), "alice", "alice-secret")
        r = await alice.request(produce_request("t", 0, batch([b"acked by all"], 0)), 9)
        assert r.responses[0].partition_responses[0].error_code == 0
        assert len({log_bytes(c, i, "t", 0) for i in c.brokers}) == 1
        # The followers' connections came in on BROKER, authenticated as the cluster user.
        fetchers = [x for x in b.connections if x.listener == INTER_BROKER_LISTENER]
        assert len(fetchers) >= 2
        assert {x.principal for x in fetchers} == {KafkaPrincipal("User", CONTROL_PLANE_USER)}
        # Clients are given the client listener's addresses only.
        md = await alice.request(MetadataRequest(topics=None), 1)
        assert sorted((x.node_id, x.port) for x in md.brokers) == sorted(
            (i, port_of(x, "SASL_PLAINTEXT")) for i, x in c.brokers.items())
        alice.close()


async def test_a_stranger_gets_nothing_served_on_the_inter_broker_listener(caplog):
    async with Cluster(config()) as c:
        await c.create_topic("t", 1, 3)
        leader = await c.leader_of("t", 0)
        b = c.brokers[leader]
        alice = await login(b.host, port_of(b, "SASL_PLAINTEXT"), "alice", "alice-secret")
        r = await alice.request(produce_request("t", 0, batch([b"before"], 0)), 9)
        assert r.responses[0].partition_responses[0].error_code == 0
        before = {i: log_bytes(c, i, "t", 0) for i in c.brokers}
        wanted = {**attacks(leader), "replica_fetch": (replica_fetch(2), FETCH_VERSION)}
        for x in c.brokers.values():
            for port in (port_of(x, INTER_BROKER_LISTENER), x.control_port):
                for req, version in wanted.values():
                    reader, writer = await asyncio.open_connection(x.host, port)
                    writer.write(raw(req, version))
                    await writer.drain()
                    assert await asyncio.wait_for(reader.read(), 10) == b""   # closed, unanswered
                    writer.close()
                # A client's credentials are unknown there; a guessed password fails.
                for user, password in (("alice", "alice-secret"), (CONTROL_PLANE_USER, "guess")):
                    with pytest.raises(AuthenticationFailed, match="Authentication failed"):
                        await login(x.host, port, user, password)
        assert {i: log_bytes(c, i, "t", 0) for i in c.brokers} == before
        # On the client listener an authenticated user without CLUSTER_ACTION is no replica.
        mallory = await login(b.host, port_of(b, "SASL_PLAINTEXT"), "mallory", "mallory-secret")
        r = await mallory.request(replica_fetch(2), FETCH_VERSION)
        assert (r.error_code, r.responses) == (TopicAuthorizationFailedError.errno, [])
        # The same Fetch from the cluster user, on BROKER, is served: the port attacked above is
        # the one replication uses.
        cluster = await login(b.host, port_of(b, INTER_BROKER_LISTENER), CONTROL_PLANE_USER,
                              PASSWORD)
        r = await cluster.request(replica_fetch(2), FETCH_VERSION)
        assert r.responses[0].partitions[0].error_code == 0
        assert r.responses[0].partitions[0].high_watermark == 1
        r = await alice.request(produce_request("t", 0, batch([b"after"], 0)), 9)
        assert r.responses[0].partition_responses[0].error_code == 0
        for conn in (alice, mallory, cluster):
            conn.close()
        assert PASSWORD not in caplog.text
