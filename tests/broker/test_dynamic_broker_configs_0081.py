"""KIP-226 dynamic broker configs as librdkafka's test 0081 (AlterConfigs and
IncrementalAlterConfigs subtests) exercises them, through confluent-kafka's AdminClient: set per
broker and as the cluster default, described with their sources, kept across a controller
failover (they are metadata records), and read-only configs refused by name."""
from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, NewTopic, ResourceType)

from minibroker.client.admin import BROKER, SET, Admin
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster():
    with ThreadedCluster(brokers=3) as c:
        yield c


@pytest.fixture
def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap})


def incremental(admin, name: str, *ops) -> None:
    res = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, op, v in ops])
    admin.incremental_alter_configs([res])[res].result(15)


def described(admin, broker: str, until=lambda got: True) -> dict[str, tuple[str, ConfigSource]]:
    """The broker's configs once `until(them)` (each broker learns them from UpdateMetadata,
    a moment after the controller committed them, as in Kafka)."""
    res = ConfigResource(ResourceType.BROKER, broker)
    deadline = time.monotonic() + 10
    while True:
        got = {k: (e.value, ConfigSource(e.source))
               for k, e in admin.describe_configs([res])[res].result(15).items()}
        if until(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def default_level(cluster, name: str, op: int, value: str | None) -> None:
    """The cluster default (resource name ""), which confluent-kafka's ConfigResource refuses:
    through minibroker's Admin."""
    async def alter():
        async with Admin(cluster.bootstrap) as admin:
            await admin.alter_configs({(BROKER, ""): {name: (op, value)}})
    asyncio.run(alter())


def test_alter_configs_on_a_broker_and_a_topic(admin):
    """do_test_AlterConfigs: a topic resource and a broker resource in one request."""
    admin.create_topics([NewTopic("t0081", 1, 1)])["t0081"].result(15)
    topic = ConfigResource(ResourceType.TOPIC, "t0081",
                           set_config={"compression.type": "gzip", "flush.ms": "12345678"})
    broker = ConfigResource(ResourceType.BROKER, "1",
                            set_config={"sasl.kerberos.min.time.before.relogin": "58000"})
    for fut in admin.alter_configs([topic, broker]).values():
        fut.result(15)
    name = "sasl.kerberos.min.time.before.relogin"
    assert described(admin, "1", lambda got: name in got)[name] == (
        "58000", ConfigSource.DYNAMIC_BROKER_CONFIG)


def test_incremental_set_append_then_delete_subtract(admin):
    """test_IncrementalAlterConfigs_simple with the BROKER resource type."""
    incremental(admin, "2", ("background.threads", AlterConfigOpType.SET, "9"),
                ("log.cleanup.policy", AlterConfigOpType.APPEND, "compact"))
    got = described(admin, "2", lambda got: "background.threads" in got)
    assert got["background.threads"] == ("9", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert got["log.cleanup.policy"] == ("delete,compact", ConfigSource.DYNAMIC_BROKER_CONFIG)
    incremental(admin, "2", ("background.threads", AlterConfigOpType.DELETE, ""),
                ("log.cleanup.policy", AlterConfigOpType.SUBTRACT, "compact"))
    got = described(admin, "2", lambda got: "background.threads" not in got)
    assert "background.threads" not in got
    assert got["log.cleanup.policy"] == ("delete", ConfigSource.DYNAMIC_BROKER_CONFIG)


def test_cluster_default_and_failover(admin, cluster):
    default_level(cluster, "log.retention.ms", SET, "3600000")
    incremental(admin, "3", ("log.retention.ms", AlterConfigOpType.SET, "60000"))
    one = described(admin, "1", lambda got: got["log.retention.ms"][0] == "3600000")
    assert one["log.retention.ms"] == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    three = described(admin, "3", lambda got: got["log.retention.ms"][0] == "60000")
    assert three["log.retention.ms"] == ("60000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    cluster.failover_controller()           # a new controller replays the ConfigRecords
    default_level(cluster, "num.io.threads", SET, "4")
    one = described(admin, "1", lambda got: "num.io.threads" in got)
    assert one["num.io.threads"] == ("4", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert one["log.retention.ms"][0] == "3600000"
    assert described(admin, "3")["log.retention.ms"][0] == "60000"


def test_per_broker_config_is_refused_as_a_cluster_default(cluster):
    with pytest.raises(Exception) as e:
        default_level(cluster, "listeners", SET, "PLAINTEXT://:9092")
    assert "Cannot update these configs at default cluster level, broker id must be " \
        "specified: Set(listeners)" in str(e.value)


@pytest.mark.parametrize("name,ops,says", [
    ("1", [("broker.id", AlterConfigOpType.SET, "7")],
     "Cannot update these configs dynamically: Set(broker.id)"),
    ("1", [("background.threads", AlterConfigOpType.SET, "zero")],
     "Invalid value zero for configuration background.threads: Not a number of type INT"),
    ("1", [("background.threads", AlterConfigOpType.APPEND, "2")],
     "Can't APPEND to key background.threads because its type is not LIST."),
])
def test_refused_with_kafka_words(admin, name, ops, says):
    with pytest.raises(KafkaException) as e:
        incremental(admin, name, *ops)
    assert says in str(e.value)
