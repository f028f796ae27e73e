"""Dynamic broker configs (the replication throttle rates): IncrementalAlterConfigs on BROKER
resources reaches each broker through UpdateMetadata, per broker over the cluster default, and
DescribeConfigs shows where each value comes from; bad names and values get Kafka's errors."""
from __future__ import annotations

import kafka.errors as Errors
import pytest
from kafka.protocol.admin import DescribeConfigsRequest

from minibroker.client import Admin
from minibroker.client.admin import BROKER, TOPIC

LEADER, FOLLOWER = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
DYNAMIC_BROKER, DYNAMIC_DEFAULT, DEFAULT = 2, 3, 5


async def described(admin: Admin, broker: int, name: str) -> tuple[str, int, list]:
    req = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=BROKER, resource_name=str(broker), configuration_keys=[name])],
        include_synonyms=True, include_documentation=False)
    await admin.metadata.fetch_all()
    [r] = (await admin.pool.request(broker, req, lo=1)).results
    [c] = r.configs
    return c.value, c.config_source, [(s.value, s.source) for s in c.synonyms]


async def test_throttle_rates_per_broker_and_cluster_default(cluster):
    async with Admin(cluster.bootstrap) as admin:
        await admin.alter_configs({(BROKER, ""): {LEADER: "5000"},
                                   (BROKER, "1"): {LEADER: "1000", FOLLOWER: "2000"}})
        for _ in range(100):
            if cluster.brokers[2].throttle.leader.rate == 5000:
                break
            await cluster.clock.sleep(0.01)
        assert (cluster.brokers[1].throttle.leader.rate,
                cluster.brokers[1].throttle.follower.rate) == (1000, 2000)
        assert (cluster.brokers[2].throttle.leader.rate,
                cluster.brokers[2].throttle.follower.rate) == (5000, None)
        assert await described(admin, 1, LEADER) == (
            "1000", DYNAMIC_BROKER, [("1000", DYNAMIC_BROKER), ("5000", DYNAMIC_DEFAULT),
                                     (str(2**63 - 1), DEFAULT)])
        assert (await described(admin, 2, LEADER))[:2] == ("5000", DYNAMIC_DEFAULT)
        assert (await described(admin, 3, FOLLOWER))[:2] == (str(2**63 - 1), DEFAULT)

        await admin.alter_configs({(BROKER, "1"): {LEADER: None}})    # back to the default
        assert (await described(admin, 1, LEADER))[:2] == ("5000", DYNAMIC_DEFAULT)
        assert cluster.brokers[1].throttle.leader.rate == 5000


@pytest.mark.parametrize("resource, configs, error, says", [
    ((BROKER, "1"), {"num.partitions": "3"}, Errors.InvalidRequestError,
     "Cannot update these configs dynamically: Set(num.partitions)"),
    ((BROKER, "1"), {LEADER: "abc"}, Errors.InvalidConfigurationError, "type LONG"),
    ((BROKER, "1"), {LEADER: "-1"}, Errors.InvalidConfigurationError, "at least 0"),
    ((BROKER, "9"), {LEADER: "1"}, Errors.InvalidRequestError, "Unknown broker id 9"),
    ((TOPIC, "t"), {"leader.replication.throttled.replicas": "0-1"},
     Errors.InvalidConfigurationError, "[partitionId]:[brokerId]"),
])
async def test_bad_names_and_values(cluster, resource, configs, error, says):
    await cluster.create_topic("t")
    async with Admin(cluster.bootstrap) as admin:
        with pytest.raises(error, match=None) as e:
            await admin.alter_configs({resource: configs})
        assert says in str(e.value)
        assert cluster.brokers[1].throttle.leader.rate is None


async def test_throttled_replicas_topic_configs_round_trip(cluster):
    await cluster.create_topic("t", partitions=2, replication_factor=2)
    async with Admin(cluster.bootstrap) as admin:
        await admin.alter_configs({(TOPIC, "t"): {
            "leader.replication.throttled.replicas": "0:1,1:2",
            "follower.replication.throttled.replicas": "*"}})
        got = (await admin.describe_configs(topics=["t"]))[(TOPIC, "t")]
        assert got["leader.replication.throttled.replicas"] == "0:1,1:2"
        assert got["follower.replication.throttled.replicas"] == "*"
