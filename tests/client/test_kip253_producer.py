"""KIP-253 in the reference producer: linear hashing over (N, U), recovery from
INVALID_PARTITION_METADATA with an older count (the topic grew or shrank under it) and a newer one
(the leader has not caught up), per-key order kept while keys move, tombstones to the parent
partition of log-compacted topics (part 9)."""
from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.api_key import ApiKey

from minibroker.client import Admin, Consumer, Producer, TopicPartition
from minibroker.client.kip253 import linear_hashing_partitioner
from minibroker.client.metadata import TopicMetadata
from minibroker.partitioning import partition_for_key
from minibroker.protocol.errors import INVALID_PARTITION_METADATA

pytestmark = pytest.mark.timeout(60)

KEYS = [b"key-%d" % i for i in range(40)]


async def settle(cluster, topic: str, count: int, undeleted: int) -> None:
    for _ in range(1000):
        ok = True
        for b in cluster.brokers.values():
            t = b.metadata.topics.get(topic)
            if t is None or len(t.partitions) != count or t.undeleted_partition_count != undeleted \
                    or any(p.leader < 0 for p in t.partitions.values()):
                ok = False
        if ok:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{topic} not at {count}/{undeleted}")


async def read_all(cluster, topic: str, partitions: int) -> dict[int, list]:
    c = Consumer(cluster.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=50)
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    out: dict[int, list] = {p: [] for p in range(partitions)}
    try:
        for _ in range(40):
            for r in await c.poll(0.1):
                out[r.partition].append((r.offset, r.key, r.value))
    finally:
        await c.close()
    return out


def test_partitioner_is_linear_hashing_and_kafka_default_without_counts():
    from minibroker.client.metadata import PartitionMetadata
    parts = {p: PartitionMetadata(p, 1, 0, (1,), (1,)) for p in range(5)}
    md = TopicMetadata("t", parts, initial_partition_count=2, undeleted_partition_count=5)
    for k in KEYS:
        assert linear_hashing_partitioner("t", k, md) == partition_for_key(k, 2, 5)
    legacy = TopicMetadata("t", parts)                 # a stock broker: Kafka's default
    from kafka.partitioner.default import murmur2
    for k in KEYS:
        assert linear_hashing_partitioner("t", k, legacy) == (murmur2(k) & 0x7FFFFFFF) % 5
    # Marked partitions (>= U) never receive unkeyed records.
    marked = TopicMetadata("t", parts, initial_partition_count=2, undeleted_partition_count=3)
    assert {linear_hashing_partitioner("t", None, marked, i) for i in range(30)} == {0, 1, 2}


async def test_older_count_expansion_then_deletion_recovers_in_order(cluster):
    await cluster.create_topic("grow", 2, 3)
    async with Producer(cluster.bootstrap, linger_ms=1) as producer, Admin(cluster.bootstrap) as admin:
        seq = {k: 0 for k in KEYS}

        async def wave():
            futs = []
            for k in KEYS:
                futs.append(producer.send("grow", b"%s|%d" % (k, seq[k]), key=k))
                seq[k] += 1
            return await asyncio.gather(*futs)

        first = await wave()
        assert {m.partition for m in first} <= {0, 1}
        await admin.create_partitions({"grow": 4})
        await settle(cluster, "grow", 4, 4)
        # The producer's metadata still says U=2: the leaders refuse, it refreshes and re-partitions.
        second = await wave()
        for k, md in zip(KEYS, second):
            assert md.partition == partition_for_key(k, 2, 4)
        await admin.create_partitions({"grow": 2})           # KIP-253 deletion: 2 and 3 marked
        await settle(cluster, "grow", 4, 2)
        third = await wave()
        for k, md in zip(KEYS, third):
            assert md.partition == partition_for_key(k, 2, 2)
    got = await read_all(cluster, "grow", 4)
    per_key: dict[bytes, list[int]] = {}
    for p in range(4):
        for _, key, value in got[p]:
            per_key.setdefault(key, []).append(int(value.split(b"|")[1]))
    # Within each partition a key's sequence numbers ascend, and nothing is lost or duplicated.
    for k in KEYS:
        assert sorted(per_key[k]) == [0, 1, 2]


async def test_newer_count_than_the_leader_retries_until_accepted(cluster):
    await cluster.create_topic("newer", 2, 1)
    async with Producer(cluster.bootstrap, linger_ms=1, retry_backoff_ms=10) as producer:
        await producer.send("newer", b"warm", key=b"a")
        cluster.faults.push_request_errors(ApiKey.Produce, [INVALID_PARTITION_METADATA] * 3)
        futs = [producer.send("newer", b"%d" % i, key=b"a") for i in range(5)]
        mds = await asyncio.gather(*futs)
    assert [m.offset for m in mds] == [1, 2, 3, 4, 5]


async def test_key_moving_to_a_new_partition_waits_for_its_records_in_flight(cluster):
    """Records of a key in flight to the parent when the producer learns the new count: later
    records of that key are held until those are resolved, so the key's order holds."""
    await cluster.create_topic("move", 1, 1)
    async with Producer(cluster.bootstrap, linger_ms=0, max_in_flight=5) as producer, \
            Admin(cluster.bootstrap) as admin:
        moving = next(k for k in KEYS if partition_for_key(k, 1, 2) == 1)
        futs = [producer.send("move", b"%d" % i, key=moving) for i in range(20)]
        expand = asyncio.ensure_future(admin.create_partitions({"move": 2}))
        for i in range(20, 200):
            futs.append(producer.send("move", b"%d" % i, key=moving))
            if i % 10 == 0:
                await asyncio.sleep(0.001)
        await expand
        await settle(cluster, "move", 2, 2)
        for i in range(200, 220):
            futs.append(producer.send("move", b"%d" % i, key=moving))
        mds = await asyncio.gather(*futs)
    assert mds[-1].partition == 1
    got = await read_all(cluster, "move", 2)
    seqs = [int(v) for _, _, v in got[0]] + [int(v) for _, _, v in got[1]]
    assert seqs == list(range(220))           # parent's records first, all before the child's


async def test_compacted_topic_gets_tombstones_in_the_parent(cluster):
    await cluster.create_topic("compacted", 1, 1, {"cleanup.policy": "compact,delete"})
    async with Producer(cluster.bootstrap, linger_ms=0, tombstone_check_interval_ms=10) as producer, \
            Admin(cluster.bootstrap) as admin:
        k = next(k for k in KEYS if partition_for_key(k, 1, 2) == 1)
        await asyncio.gather(*[producer.send("compacted", b"old%d" % i, key=k) for i in range(3)])
        await admin.create_partitions({"compacted": 2})
        await settle(cluster, "compacted", 2, 2)
        await producer.send("compacted", b"x", key=k)          # learns the new count
        # The parent still holds records from before the expansion: no tombstone yet.
        for _ in range(3):
            await producer.send("compacted", b"new", key=k)
            await asyncio.sleep(0.05)
        assert producer.tombstones_sent == 0
        await admin.delete_records({TopicPartition("compacted", 0): -1})
        for _ in range(20):
            await producer.send("compacted", b"new", key=k)
            await asyncio.sleep(0.05)
            if producer.tombstones_sent:
                break
        assert producer.tombstones_sent >= 1
        await asyncio.sleep(0.1)
    got = await read_all(cluster, "compacted", 2)
    assert (k, None) in [(key, value) for _, key, value in got[0]]
