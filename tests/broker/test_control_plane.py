"""Inter-broker APIs (issue 25, item 1): LeaderAndIsr, StopReplica and UpdateMetadata are served
only on each broker's control-plane listener (KIP-291), which Metadata never advertises; a client
listener neither lists them in ApiVersions (as Kafka 4) nor serves them: a client sending one is
closed with one log line and nothing changes. A real 3-broker cluster over loopback sockets.
"""
from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from cluster_helpers import batch, connect, log_bytes, produce_request
from minibroker.cluster import Cluster
from minibroker.network.client import encode_request
from minibroker.protocol.messages import (LeaderAndIsrRequest, StopReplicaRequest,
                                          UpdateMetadataRequest)

_ST = StopReplicaRequest.StopReplicaTopicState
_UM_B = UpdateMetadataRequest.UpdateMetadataBroker


def raw(req, version: int) -> bytes:
    return b"".join(bytes(p) for p in encode_request(req, version, 9, "attacker"))


def attacks(leader: int) -> dict:
    common = dict(controller_id=leader, is_k_raft_controller=False, controller_epoch=2**31 - 1,
                  broker_epoch=-1)
    return {
        "stop_replica_delete": (StopReplicaRequest(topic_states=[_ST(
            topic_name="t", partition_states=[_ST.StopReplicaPartitionState(
                partition_index=0, leader_epoch=-1, delete_partition=True)])], **common), 4),
        "update_metadata_redirect": (UpdateMetadataRequest(
            request_type=0, topic_states=[], max_partition_epoch=0, live_brokers=[_UM_B(
                id=leader, endpoints=[_UM_B.UpdateMetadataEndpoint(
                    port=1, host="10.9.9.9", listener="PLAINTEXT", security_protocol=0)],
                rack=None)], **common), 8),
        "leader_and_isr_max_epoch": (LeaderAndIsrRequest(
            request_type=0, live_leaders=[], topic_states=[LeaderAndIsrRequest.LeaderAndIsrTopicState(
                topic_name="t", topic_id=uuid.UUID(int=1), partition_states=[],
                undeleted_partition_count=1, configs=[])], **common), 7),
    }


@pytest.mark.timeout(60)
@pytest.mark.parametrize("attack", ["stop_replica_delete", "update_metadata_redirect",
                                    "leader_and_isr_max_epoch"])
async def test_a_client_cannot_reach_inter_broker_apis(attack, caplog):
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 1, 3)
        leader = await c.leader_of("t", 0)
        conn = await connect(c, leader, "owner")
        r = await conn.request(produce_request("t", 0, batch([b"acked"], 0)), 9)
        assert r.responses[0].partition_responses[0].error_code == 0
        before = log_bytes(c, leader, "t", 0)
        b = c.brokers[leader]
        req, version = attacks(leader)[attack]
        reader, writer = await asyncio.open_connection(b.host, b.port)
        writer.write(raw(req, version))
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 10) == b""        # closed, unanswered
        writer.close()
        assert any("served on the control-plane listener only" in r.getMessage()
                   for r in caplog.records)
        assert log_bytes(c, leader, "t", 0) == before
        md = await conn.request(MetadataRequest(topics=None), 1)
        assert sorted((x.node_id, x.port) for x in md.brokers) == sorted(
            (x.node_id, x.port) for x in c.brokers.values())
        # The cluster still replicates and answers (the controller uses the control plane).
        r = await conn.request(produce_request("t", 0, batch([b"after"], 0)), 9)
        assert r.responses[0].partition_responses[0].error_code == 0
        conn.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sockets", [False, True])
async def test_client_listeners_neither_list_nor_advertise_the_control_plane(sockets):
    """In one process (the default) there is no control-plane port at all: the controller
    reaches each broker through an in-memory pipe. Over inter-broker sockets there is one,
    never advertised."""
    async with Cluster(brokers=3, minibroker_inter_broker_sockets=sockets) as c:
        conn = await connect(c, 1)
        av = await conn.request(ApiVersionsRequest(), 3)
        keys = {k.api_key for k in av.api_keys}
        assert not keys & {4, 5, 6} and {0, 1, 3, 18} <= keys
        md = await conn.request(MetadataRequest(topics=None), 1)
        control_ports = {b.control_port for b in c.brokers.values()}
        image = (await c.active_controller()).image
        if sockets:
            assert all(b.control_port > 0 and b.control_port != b.port
                       for b in c.brokers.values())
            assert not {x.port for x in md.brokers} & control_ports
        else:
            assert control_ports == {0}
            assert all(b._control_server is None for b in c.brokers.values())
            assert {r.control_port for r in image.brokers.values()} == {-1}
        await c.create_topic("t", 1, 3)             # the controller still reaches every broker
        conn.close()


@pytest.mark.timeout(60)
async def test_a_control_request_for_an_earlier_broker_epoch_is_stale():
    """KIP-380: after a restart the broker's epoch is higher; a request carrying the old one
    (sent to its earlier incarnation) is answered STALE_BROKER_EPOCH and changes nothing."""
    from kafka.errors import StaleBrokerEpochError
    from minibroker.network.client import KafkaClientConnection
    async with Cluster(brokers=3, minibroker_inter_broker_sockets=True) as c:
        b = c.brokers[2]
        old_epoch = b.broker_epoch
        await c.restart_broker(2)
        assert b.broker_epoch > old_epoch
        ctl = await KafkaClientConnection.connect(b.host, b.control_port, client_id="controller")
        req = UpdateMetadataRequest(
            controller_id=1, is_k_raft_controller=False, controller_epoch=2**31 - 1,
            broker_epoch=old_epoch, request_type=0, topic_states=[], max_partition_epoch=0,
            live_brokers=[])
        r = await ctl.request(req, 8)
        assert r.error_code == StaleBrokerEpochError.errno
        req.broker_epoch = -1                   # unknown: refused too
        r = await ctl.request(req, 8)
        assert r.error_code == StaleBrokerEpochError.errno
        assert sorted(b.metadata.brokers) == [1, 2, 3]
        ctl.close()
