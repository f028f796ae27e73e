"""The control plane over TCP (serve --processes) authenticates: only the controller, with the
SASL/SCRAM credentials generated at start, gets LeaderAndIsr, UpdateMetadata or StopReplica
served; a stranger with no credentials, a wrong password or a replayed (stolen) SCRAM exchange
is refused before any of them reaches the broker."""
from __future__ import annotations

import asyncio
import logging

import pytest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from scramp import ScramClient

from minibroker.broker.listener_security import CONTROL_PLANE_USER
from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection
from minibroker.network.sasl_client import scram_authenticate
from minibroker.protocol.messages import (
    LeaderAndIsrRequest, StopReplicaRequest, UpdateMetadataRequest)

CONFIG = dict(brokers=2, minibroker_inter_broker_sockets=True,
              minibroker_control_plane_password="generated-at-start")


def attacks():
    """The three requests of issue 41's report, as a stranger would send them."""
    return [
        (StopReplicaRequest(controller_id=1, controller_epoch=1, broker_epoch=-1,
                            delete_partitions=True, ungrouped_partitions=[], topics=[],
                            topic_states=[]), 3),
        (UpdateMetadataRequest(controller_id=1, controller_epoch=1, broker_epoch=-1,
                               topic_states=[], live_brokers=[]), 7),
        (LeaderAndIsrRequest(controller_id=1, controller_epoch=2**31 - 1, broker_epoch=-1,
                             topic_states=[], live_leaders=[]), 6),
    ]


async def closed(conn: KafkaClientConnection) -> bool:
    for _ in range(100):
        if conn.closed:
            return True
        await asyncio.sleep(0.05)
    return False


async def test_the_controller_authenticates_and_strangers_are_refused(caplog):
    caplog.set_level(logging.INFO)
    async with Cluster(**CONFIG) as c:
        await c.create_topic("t", 2, 2)        # LeaderAndIsr/UpdateMetadata over SCRAM/TCP
        b = c.brokers[2]
        assert b.metadata.topics["t"] and b.replica_manager.get("t", 0) is not None
        before = (b.metadata.controller_epoch, sorted(b.metadata.topics))
        for req, version in attacks():
            # No credentials: the request closes the connection unserved.
            conn = await KafkaClientConnection.connect(b.host, b.control_port)
            with pytest.raises((ConnectionError, asyncio.TimeoutError)):
                await conn.request(req, version, timeout=5)
            # A wrong password: SASL_AUTHENTICATION_FAILED, then the close.
            conn = await KafkaClientConnection.connect(b.host, b.control_port)
            with pytest.raises(ConnectionError, match="Authentication failed"):
                await scram_authenticate(conn, CONTROL_PLANE_USER, "guessed")
            assert await closed(conn)
        # A stolen exchange: the controller's client-final replayed on a new connection fails,
        # since the server's nonce differs every time.
        conn = await KafkaClientConnection.connect(b.host, b.control_port)
        await conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
        client = ScramClient(["SCRAM-SHA-512"], CONTROL_PLANE_USER, "generated-at-start")
        stolen_first = client.get_client_first()
        first = await conn.request(SaslAuthenticateRequest(auth_bytes=stolen_first.encode()), 2)
        client.set_server_first(bytes(first.auth_bytes).decode())
        stolen_final = client.get_client_final()
        conn.close()
        thief = await KafkaClientConnection.connect(b.host, b.control_port)
        await thief.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
        await thief.request(SaslAuthenticateRequest(auth_bytes=stolen_first.encode()), 2)
        resp = await thief.request(SaslAuthenticateRequest(auth_bytes=stolen_final.encode()), 2)
        assert resp.error_code == 58
        assert await closed(thief)
        # Nothing reached the broker: same controller epoch, the topic still there.
        assert (b.metadata.controller_epoch, sorted(b.metadata.topics)) == before
        assert b.replica_manager.get("t", 0) is not None
        assert "generated-at-start" not in caplog.text


async def test_without_the_password_set_nothing_changes():
    async with Cluster(brokers=1) as c:
        assert c.faults.network.control_plane_credentials is None
