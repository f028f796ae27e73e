"""KIP-848 group configs (ConfigResource type GROUP, Kafka 4.0+) as librdkafka's test 0081
exercises them (do_test_IncrementalAlterConfigs' GROUP resource, do_test_DescribeConfigs_groups),
through confluent-kafka's AdminClient: set on any group id, described with their source, checked
with Kafka's bounds, refused as an unknown resource type by an emulated 3.9."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ConfigSource, ResourceType)

from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def admin():
    with ThreadedCluster(brokers=2) as c:
        yield AdminClient({"bootstrap.servers": c.bootstrap})


def incremental(admin, group: str, *ops) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, op, v in ops])
    admin.incremental_alter_configs([res])[res].result(15)


def described(admin, group: str) -> dict[str, tuple[str, ConfigSource]]:
    res = ConfigResource(ResourceType.GROUP, group)
    return {k: (e.value, ConfigSource(e.source))
            for k, e in admin.describe_configs([res])[res].result(15).items()}


def test_a_group_that_does_not_exist_describes_kafkas_defaults(admin):
    got = described(admin, "no-such-group")
    assert got["consumer.session.timeout.ms"] == ("45000", ConfigSource.DEFAULT_CONFIG)
    assert got["consumer.heartbeat.interval.ms"] == ("5000", ConfigSource.DEFAULT_CONFIG)
    assert got["share.auto.offset.reset"] == ("latest", ConfigSource.DEFAULT_CONFIG)


def test_set_then_delete(admin):
    incremental(admin, "my-group",
                ("consumer.session.timeout.ms", AlterConfigOpType.SET, "50000"))
    assert described(admin, "my-group")["consumer.session.timeout.ms"] == (
        "50000", ConfigSource.GROUP_CONFIG)
    assert described(admin, "other-group")["consumer.session.timeout.ms"][0] == "45000"
    incremental(admin, "my-group",
                ("consumer.session.timeout.ms", AlterConfigOpType.DELETE, None))
    assert described(admin, "my-group")["consumer.session.timeout.ms"] == (
        "45000", ConfigSource.DEFAULT_CONFIG)


@pytest.mark.parametrize("name, value, message", [
    ("consumer.session.timeout.ms", "30000",
     "consumer.session.timeout.ms must be greater than or equal to "
     "group.consumer.min.session.timeout.ms"),
    ("consumer.heartbeat.interval.ms", "20000",
     "consumer.heartbeat.interval.ms must be less than or equal to "
     "group.consumer.max.heartbeat.interval.ms"),
    ("consumer.session.timeout.ms", "abc",
     "Invalid value abc for configuration consumer.session.timeout.ms: Not a number of type INT"),
    ("no.such.config", "1", "Unknown group config name: no.such.config"),
])
def test_kafkas_bounds_refuse_with_invalid_config(admin, name, value, message):
    with pytest.raises(KafkaException) as e:
        incremental(admin, "bounded", (name, AlterConfigOpType.SET, value))
    assert e.value.args[0].name() == "INVALID_CONFIG"
    assert message in e.value.args[0].str()
    assert "bounded" not in str(described(admin, "bounded"))


def test_append_to_a_group_config_is_refused(admin):
    with pytest.raises(KafkaException) as e:
        incremental(admin, "g", ("share.auto.offset.reset", AlterConfigOpType.APPEND, "earliest"))
    assert "because its type is not LIST" in e.value.args[0].str()


def test_kafka_3_9_does_not_know_group_resources():
    with ThreadedCluster(brokers=1, kafka_version="3.9") as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        with pytest.raises(KafkaException) as e:
            incremental(admin, "g", ("consumer.session.timeout.ms", AlterConfigOpType.SET,
                                     "50000"))
        assert e.value.args[0].name() == "INVALID_REQUEST"


def test_the_authorizer_checks_the_group_as_kafka_does():
    """ALTER_CONFIGS / DESCRIBE_CONFIGS on the GROUP resource, else GROUP_AUTHORIZATION_FAILED
    (Kafka 4's KafkaApis); other groups unaffected."""
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType,
                                       ResourcePatternType)
    with ThreadedCluster(brokers=1, allow_everyone_if_no_acl_found=True,
                         authorizer_class_name="org.apache.kafka.metadata.authorizer."
                                               "StandardAuthorizer") as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        denied = [AclBinding(ResourceType.GROUP, "locked", ResourcePatternType.LITERAL,
                             "User:*", "*", op, AclPermissionType.DENY)
                  for op in (AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS)]
        for f in admin.create_acls(denied).values():
            f.result(15)
        set_it = ("consumer.session.timeout.ms", AlterConfigOpType.SET, "50000")
        with pytest.raises(KafkaException) as e:
            incremental(admin, "locked", set_it)
        assert e.value.args[0].name() == "GROUP_AUTHORIZATION_FAILED"
        with pytest.raises(KafkaException) as e:
            described(admin, "locked")
        assert e.value.args[0].name() == "GROUP_AUTHORIZATION_FAILED"
        incremental(admin, "open", set_it)
        assert described(admin, "open")["consumer.session.timeout.ms"][0] == "50000"


def test_a_new_controller_and_a_snapshot_keep_them():
    """Group configs are metadata records: a controller failover replays them, and the
    snapshot text of an image carries them."""
    from minibroker.config import ClusterConfig
    from minibroker.controller import group_configs, snapshot
    from minibroker.controller.delta import MetadataDelta
    from minibroker.controller.image import MetadataImage

    res = group_configs.alter_group_configs(MetadataImage(), ClusterConfig(), "g",
                                            {"consumer.session.timeout.ms": "50000"})
    delta = MetadataDelta(MetadataImage())
    for offset, record in enumerate(res.records):
        delta.replay(record, offset)
    image = delta.apply()
    assert dict(image.group_configs["g"]) == {"consumer.session.timeout.ms": "50000"}
    again = snapshot.from_text(snapshot.to_text(image))
    assert dict(again.group_configs["g"]) == {"consumer.session.timeout.ms": "50000"}


def test_kept_across_a_controller_failover():
    with ThreadedCluster(brokers=3) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        incremental(admin, "kept", ("consumer.heartbeat.interval.ms", AlterConfigOpType.SET,
                                    "6000"))
        c.failover_controller()
        assert described(admin, "kept")["consumer.heartbeat.interval.ms"] == (
            "6000", ConfigSource.GROUP_CONFIG)
