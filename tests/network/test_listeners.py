"""Kafka's listener configs: several listeners per broker, and Metadata, FindCoordinator and
DescribeCluster answering with the endpoints of the listener the client connected on."""
from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.admin import DescribeClusterRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection
from minibroker.security.listeners import broker_listeners, parse_listeners, protocol_map
from minibroker.config import ClusterConfig


async def test_each_listener_answers_with_its_own_endpoints():
    async with Cluster(brokers=2, listeners="PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
                       listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                       inter_broker_listener_name="INTERNAL",
                       advertised_listeners="PLAINTEXT://localhost:0") as c:
        await c.create_topic("t", 1, 2)
        for name in ("PLAINTEXT", "INTERNAL"):
            host, port = c.bootstrap_for(name).split(",")[0].split(":")
            conn = await KafkaClientConnection.connect("127.0.0.1", int(port))
            md = await conn.request(MetadataRequest(topics=None), 1)
            want = sorted((b.node_id, *[(a.host, a.port) for a in b.advertised_listeners()
                                        if a.name == name][0]) for b in c.brokers.values())
            assert sorted((b.node_id, b.host, b.port) for b in md.brokers) == want
            assert all(h == ("localhost" if name == "PLAINTEXT" else "127.0.0.1")
                       for _, h, _ in want)
            for _ in range(100):                # until __consumer_offsets has leaders
                fc = await conn.request(FindCoordinatorRequest(key="g", key_type=0), 2)
                if fc.error_code == 0:
                    break
                await asyncio.sleep(0.1)
            assert (fc.host, fc.port) in [(h, p) for _, h, p in want]
            dc = await conn.request(DescribeClusterRequest(include_cluster_authorized_operations=False), 0)
            assert sorted((b.broker_id, b.host, b.port) for b in dc.brokers) == want
            conn.close()
        # Replication and the bootstrap use the inter-broker listener.
        assert c.bootstrap == c.bootstrap_for("INTERNAL")
        # DescribeConfigs' listeners / advertised.listeners, with the bound ports.
        b = c.brokers[1]
        ports = {x.name: x.port for x in b.listeners}
        assert b.listener_configs() == (
            f"PLAINTEXT://127.0.0.1:{ports['PLAINTEXT']},INTERNAL://127.0.0.1:{ports['INTERNAL']}",
            f"INTERNAL://127.0.0.1:{ports['INTERNAL']},PLAINTEXT://localhost:{ports['PLAINTEXT']}")


def test_listener_parsing_follows_kafka():
    protocols = protocol_map("CLIENT:SASL_SSL,PLAINTEXT:PLAINTEXT")
    assert [str(x) for x in parse_listeners("CLIENT://0.0.0.0:9093, PLAINTEXT://:9092",
                                            protocols)] == ["CLIENT://0.0.0.0:9093",
                                                            "PLAINTEXT://:9092"]
    with pytest.raises(ValueError, match="No security protocol defined for listener OTHER"):
        parse_listeners("OTHER://h:1", protocols)
    with pytest.raises(ValueError, match="PLAINTEXT repeats"):
        parse_listeners("PLAINTEXT://h:1,PLAINTEXT://h:2", protocols)
    cfg = ClusterConfig(listeners="SASL_SSL://127.0.0.1:9093")
    assert [(x.port, x.security_protocol) for x in broker_listeners(cfg, 3)] == \
        [(9095, "SASL_SSL")]


def test_control_plane_listener_name_is_refused_not_ignored():
    with pytest.raises(ValueError, match="control.plane.listener.name is not supported"):
        ClusterConfig(control_plane_listener_name="CONTROLLER")
