"""minibroker.client against the served cluster: the shape of test_clients.py (every codec, offsets,
admin, idempotence) plus reads across our client and kafka-python in both directions."""
from __future__ import annotations

import importlib

import pytest

from conformance import checks
from conformance.drivers import ALL_CODECS, load
from conformance.test_clients import (IO_TIMEOUT, PARTITIONS, _eventually, roundtrip, seed_for)

pytestmark = pytest.mark.timeout(120)

NAME = "minibroker_client"


def ours():
    return importlib.import_module("conformance.drivers.minibroker_client")


def create(cluster, d, topic, partitions=PARTITIONS, configs=None):
    d.create_topic(cluster.bootstrap, topic, partitions, cluster.replication, configs=configs,
                   timeout=IO_TIMEOUT)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_produce_consume_offsets(cluster, codec):
    d = ours()
    topic = cluster.topic_name(f"{NAME}-{codec}")
    create(cluster, d, topic)
    consumed = roundtrip(cluster, d, d, topic, codec, seed_for(NAME, codec))
    assert d.list_offsets(cluster.bootstrap, topic, timeout=IO_TIMEOUT) == \
        checks.expected_offsets(consumed, PARTITIONS)


def test_admin(cluster):
    d = ours()
    bs = cluster.bootstrap
    topic = cluster.topic_name(f"admin-{NAME}")
    create(cluster, d, topic, configs={"retention.ms": "7200000"})
    assert topic in d.list_topics(bs, timeout=IO_TIMEOUT)
    assert d.partition_count(bs, topic, timeout=IO_TIMEOUT) == PARTITIONS
    with pytest.raises(Exception):
        d.create_topic(bs, topic, PARTITIONS, cluster.replication, timeout=IO_TIMEOUT)
    assert d.describe_configs(bs, topic, timeout=IO_TIMEOUT).get("retention.ms") == "7200000"
    d.create_partitions(bs, topic, PARTITIONS + 2, timeout=IO_TIMEOUT)
    assert _eventually(lambda: d.partition_count(bs, topic, timeout=IO_TIMEOUT),
                       PARTITIONS + 2) == PARTITIONS + 2
    want = {p: (0, 0) for p in range(PARTITIONS + 2)}
    assert _eventually(lambda: d.list_offsets(bs, topic, timeout=IO_TIMEOUT), want) == want
    d.delete_topic(bs, topic, timeout=IO_TIMEOUT)
    assert _eventually(lambda: topic in d.list_topics(bs, timeout=IO_TIMEOUT), False) is False


@pytest.mark.parametrize("codec", ("none", "zstd"))
def test_idempotent_producer(cluster, codec):
    d = ours()
    topic = cluster.topic_name(f"idem-{NAME}-{codec}")
    create(cluster, d, topic)
    consumed = roundtrip(cluster, d, d, topic, codec, seed_for("idem", NAME, codec),
                         idempotent=True)
    assert d.list_offsets(cluster.bootstrap, topic, timeout=IO_TIMEOUT) == \
        checks.expected_offsets(consumed, PARTITIONS)


@pytest.mark.parametrize(("producer", "consumer", "codec"),
                         [(NAME, "kafka_python", "lz4"), ("kafka_python", NAME, "snappy")])
def test_cross_client(cluster, producer, consumer, codec):
    dp = ours() if producer == NAME else load(producer)
    dc = ours() if consumer == NAME else load(consumer)
    topic = cluster.topic_name(f"cross-{producer}-{consumer}-{codec}")
    create(cluster, ours(), topic)
    consumed = roundtrip(cluster, dp, dc, topic, codec, seed_for("cross", producer, consumer))
    assert dc.list_offsets(cluster.bootstrap, topic, timeout=IO_TIMEOUT) == \
        checks.expected_offsets(consumed, PARTITIONS)
