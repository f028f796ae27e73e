"""Issue 24, must show 4: a compacted topic with 100k updates over 1k keys, read from the start by
a real client (confluent-kafka) after compaction, holds the latest value of every key and no
deleted key once delete.retention.ms has passed — on every replica (each compacts its own copy).
Short configs (segment.ms, delete.retention.ms, the cleaner's backoff) keep it fast."""
from __future__ import annotations

import time

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from minibroker.testing import ThreadedCluster  # noqa: E402

pytestmark = pytest.mark.timeout(180)
UPDATES, KEYS, DELETED = 100_000, 1_000, 100
TOPIC = "compacted"


def consume_all(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "enable.partition.eof": True})
    c.assign([confluent_kafka.TopicPartition(TOPIC, 0, confluent_kafka.OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(m.error())
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    raise AssertionError("did not reach the end of the partition")


def test_compacted_topic_holds_the_latest_value_of_every_key():
    with ThreadedCluster(brokers=3, log_cleaner_backoff_ms=100) as c:
        c.create_topic(TOPIC, 1, 3, {"cleanup.policy": "compact", "segment.ms": "200",
                                     "min.cleanable.dirty.ratio": "0.01",
                                     "delete.retention.ms": "1000"})
        p = confluent_kafka.Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 20,
                                      "acks": "all", "compression.type": "lz4"})

        def send(key, value):
            for _ in range(1000):
                try:
                    return p.produce(TOPIC, key=key, value=value)
                except BufferError:
                    p.poll(0.1)
            raise AssertionError("the producer's queue stayed full")

        for i in range(UPDATES):
            send(b"k%d" % (i % KEYS), b"v%d" % i)
        for k in range(DELETED):
            send(b"k%d" % k, None)                                      # tombstones
        assert p.flush(60) == 0
        latest = {b"k%d" % (i % KEYS): b"v%d" % i for i in range(UPDATES)}
        for k in range(DELETED):
            del latest[b"k%d" % k]

        # the active segment is never compacted: a later append rolls it (segment.ms)
        deadline = time.monotonic() + 60
        got = None
        while time.monotonic() < deadline:
            time.sleep(0.3)
            send(b"roll", b"x")
            assert p.flush(30) == 0
            records = consume_all(c.bootstrap)
            got = {k: v for _, k, v in records if k != b"roll"}
            if len(records) < 2 * KEYS and got == latest:
                break
        offsets = [o for o, _, _ in records]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        assert got == latest, f"{len(got)} keys read, {len(latest)} expected"
        # each key once (its latest value), no tombstone left, plus the roll records
        assert len([k for _, k, _ in records if k != b"roll"]) == len(latest)

        # every replica compacts its own copy: a follower on its own schedule, below the high
        # watermark it learns with its next fetch (up to replica.fetch.wait.max.ms later)
        def replica_size(broker_id):
            return c.cluster.brokers[broker_id].replica_manager.partitions[(TOPIC, 0)].log.size_bytes
        deadline = time.monotonic() + 30
        while True:
            sizes = [replica_size(b) for b in (1, 2, 3)]
            if all(s < 200_000 for s in sizes) or time.monotonic() > deadline:
                break
            send(b"roll", b"x")             # the next fetch carries the high watermark
            assert p.flush(30) == 0
            time.sleep(0.3)
        assert all(s < 200_000 for s in sizes), sizes         # 100k records were ~2 MB
        print(f"read {len(records)} records; replica log sizes {sizes} bytes")
