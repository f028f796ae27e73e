"""minibroker.client against the served cluster: the shape of test_clients.py (every codec, offsets,
admin, idempotence) plus reads across our client and kafka-python in both directions."""
from __future__ import annotations

import importlib

import pytest

from conformance.drivers import ALL_CODECS, load
from conformance.test_clients import check_admin, create, roundtrip, seed_for

pytestmark = pytest.mark.timeout(120)

NAME = "minibroker_client"


def ours():
    return importlib.import_module("conformance.drivers.minibroker_client")


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_produce_consume_offsets(cluster, codec):
    d = ours()
    topic = cluster.topic_name(f"{NAME}-{codec}")
    create(cluster, d, topic)
    roundtrip(cluster, d, d, topic, codec, seed_for(NAME, codec))


def test_admin(cluster):
    check_admin(cluster, ours(), NAME)


@pytest.mark.parametrize("codec", ("none", "zstd"))
def test_idempotent_producer(cluster, codec):
    d = ours()
    topic = cluster.topic_name(f"idem-{NAME}-{codec}")
    create(cluster, d, topic)
    roundtrip(cluster, d, d, topic, codec, seed_for("idem", NAME, codec), idempotent=True)


@pytest.mark.parametrize(("producer", "consumer", "codec"),
                         [(NAME, "kafka_python", "lz4"), ("kafka_python", NAME, "snappy")])
def test_cross_client(cluster, producer, consumer, codec):
    dp = ours() if producer == NAME else load(producer)
    dc = ours() if consumer == NAME else load(consumer)
    topic = cluster.topic_name(f"cross-{producer}-{consumer}-{codec}")
    create(cluster, ours(), topic)
    roundtrip(cluster, dp, dc, topic, codec, seed_for("cross", producer, consumer))
