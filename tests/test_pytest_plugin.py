"""The pytest plugin shipped with the package: a client's own suite gets a running cluster."""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.real_time


def test_minibroker_cluster_fixture_serves_a_real_client(pytester):
    pytester.makepyfile(test_client="""
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        def test_round_trip(minibroker_cluster):
            assert len(minibroker_cluster.bootstrap.split(",")) == 2
            minibroker_cluster.create_topic("t", 1, 2)
            p = KafkaProducer(bootstrap_servers=minibroker_cluster.bootstrap, acks="all")
            p.send("t", b"hello").get(10)
            p.close()
            c = KafkaConsumer(bootstrap_servers=minibroker_cluster.bootstrap,
                              consumer_timeout_ms=3000, auto_offset_reset="earliest")
            c.assign([TopicPartition("t", 0)])
            assert [m.value for m in c] == [b"hello"]
            c.close()
    """)
    result = pytester.runpytest_subprocess("--minibroker-brokers", "2", "-p", "no:cacheprovider",
                                           timeout=120)
    result.assert_outcomes(passed=1)
