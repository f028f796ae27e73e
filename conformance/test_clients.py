"""Real clients against the served cluster: produce/consume under every codec, offsets, admin,
idempotent producers and cross-client reads. See SKIPPED.md for what is left out and why."""
from __future__ import annotations

import time
import zlib

import pytest

from conformance import checks
from conformance.drivers import ALL_CODECS, CLIENTS, load

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 3
N_RECORDS = 300
IO_TIMEOUT = 30.0


def driver(name):
    d = load(name)
    why = d.available() if hasattr(d, "available") else None
    if why:
        pytest.fail(f"{name}: {why}")
    return d


def seed_for(*parts: str) -> int:
    return zlib.crc32("/".join(parts).encode())


def create(cluster, d, topic, partitions=PARTITIONS, configs=None):
    """Create with the client's own admin API, or with kafka-python's for clients without one."""
    admin = d if d.HAS_ADMIN else load("kafka_python")
    admin.create_topic(cluster.bootstrap, topic, partitions, cluster.replication, configs=configs,
                       timeout=IO_TIMEOUT)


def roundtrip(cluster, producer, consumer, topic, codec, seed, idempotent=False) -> None:
    """`producer` writes N_RECORDS records, `consumer` reads them all back, and its ListOffsets
    shows exactly them."""
    bs = cluster.bootstrap
    records = checks.make_records(N_RECORDS, seed)
    produced = producer.produce(bs, topic, records, codec, acks="all", idempotent=idempotent,
                                timeout=60)
    consumed = consumer.consume_assigned(bs, topic, list(range(PARTITIONS)), len(records),
                                         timeout=IO_TIMEOUT)
    checks.check_readback(records, produced, consumed, PARTITIONS)
    assert consumer.list_offsets(bs, topic, timeout=IO_TIMEOUT) == \
        checks.expected_offsets(consumed, PARTITIONS)


def _client_codec_params():
    for name in CLIENTS:
        missing = load(name).MISSING_CODECS
        for codec in ALL_CODECS:
            marks = [pytest.mark.skip(reason=f"{name} lacks {codec}: {missing[codec]}")] \
                if codec in missing else []
            yield pytest.param(name, codec, id=f"{name}-{codec}", marks=marks)


@pytest.mark.parametrize(("client", "codec"), list(_client_codec_params()))
def test_produce_consume_offsets(cluster, client, codec):
    d = driver(client)
    topic = cluster.topic_name(f"{client}-{codec}")
    create(cluster, d, topic)
    roundtrip(cluster, d, d, topic, codec, seed_for(client, codec))


ADMIN_CLIENTS = [c for c in CLIENTS if load(c).HAS_ADMIN]


def _eventually(fn, expect, timeout=15.0, interval=0.3):
    deadline = time.monotonic() + timeout
    got = None
    for _ in range(int(timeout / interval) + 1):
        got = fn()
        if got == expect or time.monotonic() > deadline:
            break
        time.sleep(interval)
    return got


@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_admin(cluster, client):
    check_admin(cluster, driver(client), client)


def check_admin(cluster, d, name: str) -> None:
    """Create (twice: refused), list, describe configs, add partitions, delete, each with the
    client's own admin API."""
    bs = cluster.bootstrap
    topic = cluster.topic_name(f"admin-{name}")
    create(cluster, d, topic, configs={"retention.ms": "7200000"})
    assert topic in d.list_topics(bs, timeout=IO_TIMEOUT)
    assert d.partition_count(bs, topic, timeout=IO_TIMEOUT) == PARTITIONS

    with pytest.raises(Exception):  # TOPIC_ALREADY_EXISTS, in each client's own way
        d.create_topic(bs, topic, PARTITIONS, cluster.replication, timeout=IO_TIMEOUT)

    configs = d.describe_configs(bs, topic, timeout=IO_TIMEOUT)
    assert configs.get("retention.ms") == "7200000", configs

    d.create_partitions(bs, topic, PARTITIONS + 2, timeout=IO_TIMEOUT)
    assert _eventually(lambda: d.partition_count(bs, topic, timeout=IO_TIMEOUT),
                       PARTITIONS + 2) == PARTITIONS + 2
    assert _eventually(lambda: d.list_offsets(bs, topic, timeout=IO_TIMEOUT),
                       {p: (0, 0) for p in range(PARTITIONS + 2)}) == \
        {p: (0, 0) for p in range(PARTITIONS + 2)}

    d.delete_topic(bs, topic, timeout=IO_TIMEOUT)
    assert _eventually(lambda: topic in d.list_topics(bs, timeout=IO_TIMEOUT), False) is False


IDEMPOTENT = [(c, codec) for c in CLIENTS if load(c).HAS_IDEMPOTENCE for codec in ("none", "zstd")]


@pytest.mark.parametrize(("client", "codec"), IDEMPOTENT, ids=[f"{c}-{k}" for c, k in IDEMPOTENT])
def test_idempotent_producer(cluster, client, codec):
    d = driver(client)
    topic = cluster.topic_name(f"idem-{client}-{codec}")
    create(cluster, d, topic)
    roundtrip(cluster, d, d, topic, codec, seed_for("idem", client, codec), idempotent=True)


# Each client's records read by another client (a ring over all five, plus a few reversed pairs),
# with codecs rotated so every codec crosses between two different implementations.
CROSS = [
    ("kafka_python", "confluent", "gzip"),
    ("confluent", "kafkajs", "zstd"),
    ("kafkajs", "kcat", "snappy"),
    ("kcat", "aiokafka", "lz4"),
    ("aiokafka", "kafka_python", "zstd"),
    ("confluent", "kafka_python", "snappy"),
    ("kafka_python", "kafkajs", "lz4"),
    ("kafkajs", "confluent", "gzip"),
    ("aiokafka", "confluent", "lz4"),
]


@pytest.mark.parametrize(("producer", "consumer", "codec"), CROSS,
                         ids=[f"{p}-to-{c}-{k}" for p, c, k in CROSS])
def test_cross_client(cluster, producer, consumer, codec):
    dp, dc = driver(producer), driver(consumer)
    topic = cluster.topic_name(f"cross-{producer}-{consumer}-{codec}")
    create(cluster, dp, topic)
    roundtrip(cluster, dp, dc, topic, codec, seed_for("cross", producer, consumer))
