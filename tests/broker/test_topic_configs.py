"""Kafka 4.x topic configs over the wire: CreateTopics with configs librdkafka's tests send,
DescribeConfigs of every topic config with types, synonyms and documentation, broker.rack and the
read-only broker configs, and Kafka's cross-config check on AlterConfigs."""
from __future__ import annotations

import pytest
from kafka.errors import InvalidConfigurationError
from kafka.protocol.admin import (CreateTopicsRequest, DescribeConfigsRequest,
                                  IncrementalAlterConfigsRequest)

from minibroker.cluster import Cluster
from minibroker.log.config import DEFAULTS, TOPIC_CONFIGS
from minibroker.network.client import KafkaClientConnection

pytestmark = pytest.mark.timeout(30)
TOPIC, BROKER = 2, 4
R = DescribeConfigsRequest.DescribeConfigsResource
LIBRDKAFKA_CONFIGS = {"compression.type": "lz4", "delete.retention.ms": "1000",
                      "segment.ms": "10000", "min.cleanable.dirty.ratio": "0.01",
                      "message.format.version": "0.10.0", "flush.messages": "1",
                      "cleanup.policy": "compact"}


async def connect(c: Cluster, broker_id: int = 1) -> KafkaClientConnection:
    b = c.brokers[broker_id]
    return await KafkaClientConnection.connect(b.host, b.port)


async def test_create_with_kafka_topic_configs_and_describe_all():
    async with Cluster(brokers=2, racks=("rack-a", None)) as c:
        conn = await connect(c)
        T = CreateTopicsRequest.CreatableTopic
        resp = await conn.request(CreateTopicsRequest(topics=[T(
            name="t", num_partitions=1, replication_factor=1, assignments=[],
            configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in LIBRDKAFKA_CONFIGS.items()])],
            timeout_ms=10000, validate_only=False), 5)
        assert resp.topics[0].error_code == 0, resp
        resp = await conn.request(DescribeConfigsRequest(
            resources=[R(resource_type=TOPIC, resource_name="t", configuration_keys=None)],
            include_synonyms=True, include_documentation=True), 4)
        entries = {e.name: e for e in resp.results[0].configs}
        assert sorted(entries) == sorted(DEFAULTS)          # every Kafka 4.x topic config
        assert "message.format.version" not in entries      # accepted, ignored (gone in 4.0)
        for name, e in entries.items():
            want = LIBRDKAFKA_CONFIGS.get(name, DEFAULTS[name])
            assert (e.value, e.config_source) == (want, 1 if name in LIBRDKAFKA_CONFIGS else 5), name
            assert e.documentation == TOPIC_CONFIGS[name].doc and e.documentation
        assert entries["min.cleanable.dirty.ratio"].config_type == 6         # DOUBLE
        assert [(s.name, s.value, s.source) for s in entries["delete.retention.ms"].synonyms] == [
            ("delete.retention.ms", "1000", 1),
            ("log.cleaner.delete.retention.ms", "86400000", 5)]
        assert [(s.name, s.source) for s in entries["segment.ms"].synonyms] == [
            ("segment.ms", 1), ("log.roll.ms", 5)]

        # brokers: broker.rack (null without one), identity, and the topic defaults' broker names
        for broker_id, rack in ((1, "rack-a"), (2, None)):
            conn_b = await connect(c, broker_id)
            resp = await conn_b.request(DescribeConfigsRequest(resources=[R(
                resource_type=BROKER, resource_name=str(broker_id), configuration_keys=[
                    "broker.rack", "broker.id", "log.cleaner.delete.retention.ms",
                    "log.retention.ms"])], include_synonyms=True,
                include_documentation=True), 4)
            got = {e.name: (e.value, e.read_only, e.documentation != "")
                   for e in resp.results[0].configs}
            assert got == {"broker.rack": (rack, True, True),
                           "broker.id": (str(broker_id), True, True),
                           # topic defaults are dynamic broker configs (KIP-226)
                           "log.cleaner.delete.retention.ms": ("86400000", False, False),
                           "log.retention.ms": ("604800000", False, False)}


async def test_compaction_lags_are_checked_together():
    async with Cluster(brokers=1) as c:
        await c.create_topic("t", 1, 1, {"max.compaction.lag.ms": "100"})
        conn = await connect(c)
        A = IncrementalAlterConfigsRequest.AlterConfigsResource
        resp = await conn.request(IncrementalAlterConfigsRequest(resources=[A(
            resource_type=TOPIC, resource_name="t", configs=[A.AlterableConfig(
                name="min.compaction.lag.ms", config_operation=0, value="500")])],
            validate_only=False), 1)
        r = resp.responses[0]
        assert (r.error_code, r.error_message) == (
            InvalidConfigurationError.errno,
            "conflict topic config setting min.compaction.lag.ms (500) > max.compaction.lag.ms (100)")
