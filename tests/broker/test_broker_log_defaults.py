"""Broker log.* configs are the defaults of topic configs (Kafka's synonyms): a topic that does not
set retention.bytes or min.insync.replicas takes the broker's, DescribeConfigs shows them as
STATIC_BROKER_CONFIG, and retention.bytes bounds an in-memory log as soon as a produce passes it."""
from __future__ import annotations

import pytest
from kafka.errors import NotEnoughReplicasError
from kafka.protocol.admin import DescribeConfigsRequest

from cluster_helpers import batch, connect, log_records, produce_request, produce_response, wire
from minibroker.cluster import Cluster
from minibroker.config import ClusterConfig
from minibroker.log.config import LogConfig, broker_defaults

TOPIC, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 4, 5


def test_broker_defaults_follow_kafka_synonyms_and_retention_units():
    d = broker_defaults({"log.retention.bytes": "1000", "min.insync.replicas": "2",
                         "log.retention.hours": "2", "message.max.bytes": "500"})
    assert (d.retention_bytes, d.min_insync_replicas, d.retention_ms, d.max_message_bytes) == \
        (1000, 2, 7_200_000, 500)
    # ms wins over minutes and hours
    assert broker_defaults({"log.retention.ms": "5", "log.retention.hours": "2"}).retention_ms == 5
    assert broker_defaults({}) == LogConfig()
    # a topic's own value wins over the broker's
    assert LogConfig.from_configs({"retention.bytes": "7"}, defaults=d).retention_bytes == 7
    with pytest.raises(ValueError, match="retention.bytes"):
        broker_defaults({"log.retention.bytes": "lots"})
    with pytest.raises(ValueError, match="log.retention.minutes"):
        broker_defaults({"log.retention.minutes": "lots"})


def test_negative_broker_retention_in_any_unit_means_no_time_limit():
    # Kafka's logRetentionTimeMillis: a negative ms, minutes or hours value is -1 (keep forever);
    # multiplied out, log.retention.hours=-1 was -3,600,000 ms and the broker refused to start.
    for name in ("log.retention.ms", "log.retention.minutes", "log.retention.hours"):
        assert broker_defaults({name: "-1"}).retention_ms == -1


async def test_broker_retention_bytes_bounds_the_log_at_produce_time():
    cfg = ClusterConfig(brokers=1, extra={"log.retention.bytes": "300"})
    async with Cluster(cfg) as c:
        await c.create_topic("t", 1, 1)
        conn = await connect(c, 1)
        now = c.clock.now_ms()
        for i in range(10):
            resp = await conn.request(produce_request("t", 0, batch([b"%03d" % i * 20], now)), 9)
            assert resp.responses[0].partition_responses[0].error_code == 0
        log = c.brokers[1].replica_manager.partitions[("t", 0)].log
        # whole batches are dropped while the rest stays >= retention.bytes
        assert 300 <= log.size_bytes < 300 + log.size_bytes // log.batch_count
        assert log.log_start_offset > 0
        assert [o for o, _ in log_records(c, 1, "t", 0)] == list(range(log.log_start_offset, 10))
        R = DescribeConfigsRequest.DescribeConfigsResource
        resp = await conn.request(DescribeConfigsRequest(resources=[
            R(resource_type=TOPIC, resource_name="t",
              configuration_keys=["retention.bytes", "retention.ms"])],
            include_synonyms=True), 4)
        got = {e.name: (e.value, e.config_source, [(s.name, s.value, s.source) for s in e.synonyms])
               for e in resp.results[0].configs}
        assert got == {
            # Kafka lists every synonym in priority order, the default last
            "retention.bytes": ("300", STATIC_BROKER_CONFIG,
                                [("log.retention.bytes", "300", STATIC_BROKER_CONFIG),
                                 ("log.retention.bytes", "-1", DEFAULT_CONFIG)]),
            "retention.ms": ("604800000", DEFAULT_CONFIG,
                             [("log.retention.ms", "604800000", DEFAULT_CONFIG)])}
        conn.close()


async def test_broker_min_insync_replicas_applies_to_topics_without_their_own():
    async with Cluster(ClusterConfig(brokers=1, min_insync_replicas=2)) as c:
        await c.create_topic("t", 1, 1)
        conn = await connect(c, 1)
        resp = await conn.request(produce_request("t", 0, batch([b"x"], c.clock.now_ms())), 9)
        assert resp == wire(produce_response(
            "t", 0, NotEnoughReplicasError.errno,
            error_message="ISR [1] is smaller than min.insync.replicas=2"), 9)
        conn.close()


async def test_log_memory_cap_bounds_every_broker_and_cuts_the_largest_partition_first():
    cfg = ClusterConfig(brokers=3, default_replication_factor=3, log_memory_max_bytes=7000,
                        log_memory_overflow="delete")
    async with Cluster(cfg) as c:
        await c.create_topic("old", 1, 3)
        await c.create_topic("new", 1, 3)
        now = c.clock.now_ms()
        for topic in ("old", "new"):
            conn = await connect(c, await c.leader_of(topic, 0))
            for i in range(8):
                resp = await conn.request(produce_request(topic, 0, batch([b"%d" % i * 100], now)), 9)
                assert resp.responses[0].partition_responses[0].error_code == 0
            conn.close()
        for b in c.brokers.values():
            rm = b.replica_manager
            old, new = rm.get("old", 0).log, rm.get("new", 0).log
            assert rm.log_memory.used == old.held_bytes + new.held_bytes
            batch_size = new.held_bytes // new.batch_count
            # at most the cap plus batches still above a high watermark (acks=all: none left)
            assert rm.log_memory.used <= 7000 + batch_size
            # "old" filled the memory first and gave way to "new": they end with fair shares
            assert old.log_start_offset > new.log_start_offset
            assert abs(old.held_bytes - new.held_bytes) <= batch_size
