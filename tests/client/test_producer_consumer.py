"""Reference client against an in-process 3-broker cluster: produce/consume round trips."""
from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from minibroker.client import Consumer, ConsumerRecord, Producer, RecordMetadata, TopicPartition
from minibroker.partitioning import key_hash

pytestmark = pytest.mark.timeout(30)


async def consume_all(bs, topic, partitions, count, timeout=8.0, **kw):
    consumer = Consumer(bs, auto_offset_reset="earliest", fetch_max_wait_ms=100, **kw)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    out: list[ConsumerRecord] = []
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    try:
        while len(out) < count and loop.time() < end:
            out += await consumer.poll(0.2)
    finally:
        await consumer.close()
    return out


@pytest.mark.parametrize("compression", [None, "gzip"])
async def test_round_trip_keys_headers(cluster, compression):
    await cluster.create_topic("rt", partitions=3, replication_factor=3)
    records = [(b"k%d" % (i % 11), b"value-%d" % i, [("h", b"%d" % i), ("n", None)])
               for i in range(500)]
    async with Producer(cluster.bootstrap, compression=compression) as producer:
        futs = [producer.send("rt", v, key=k, headers=h) for k, v, h in records]
        mds = await asyncio.gather(*futs)
    assert all(isinstance(md, RecordMetadata) for md in mds)
    for (k, _, _), md in zip(records, mds):
        assert md.partition == key_hash(k) % 3            # Kafka's default partitioner
    consumed = await consume_all(cluster.bootstrap, "rt", 3, len(records))
    at = {(r.partition, r.offset): r for r in consumed}
    assert len(at) == len(records) == len(consumed)
    for (k, v, h), md in zip(records, mds):
        r = at[(md.partition, md.offset)]
        assert (r.key, r.value, list(r.headers)) == (k, v, h)
        assert r.timestamp == md.timestamp


async def test_ordering_per_partition_pipelined_idempotent(cluster):
    await cluster.create_topic("ord", partitions=3, replication_factor=3)
    n = 3000
    async with Producer(cluster.bootstrap, max_in_flight=5, linger_ms=0, batch_size=512,
                        enable_idempotence=True) as producer:
        futs = [producer.send("ord", b"%06d" % i, key=b"k%d" % (i % 5)) for i in range(n)]
        mds = await asyncio.gather(*futs)
    by_key = defaultdict(list)
    for i, md in enumerate(mds):
        by_key[i % 5].append((md.partition, md.offset))
    for key, places in by_key.items():
        assert len({p for p, _ in places}) == 1
        offsets = [o for _, o in places]
        assert offsets == sorted(offsets), f"key {key} out of order"
    consumed = await consume_all(cluster.bootstrap, "ord", 3, n)
    assert len(consumed) == n
    per_part = defaultdict(list)
    for r in consumed:
        per_part[r.partition].append(r)
    for p, recs in per_part.items():
        assert [r.offset for r in recs] == list(range(len(recs)))
        seqs = defaultdict(list)
        for r in recs:
            seqs[r.key].append(int(r.value))
        for k, s in seqs.items():
            assert s == sorted(s)


async def test_unkeyed_sticky_spreads_and_explicit_partition(cluster):
    await cluster.create_topic("unk", partitions=3, replication_factor=1)
    async with Producer(cluster.bootstrap, batch_size=200, linger_ms=1) as producer:
        mds = await asyncio.gather(*[producer.send("unk", b"x" * 50) for _ in range(60)])
        fixed = await producer.send("unk", b"y", partition=2)
    assert {md.partition for md in mds} == {0, 1, 2}
    assert fixed.partition == 2


async def test_custom_partitioner_gets_topic_metadata(cluster):
    await cluster.create_topic("cp", partitions=4, replication_factor=1)
    seen = []

    def last(topic, key, md):
        seen.append((topic, md.partition_count, md.initial_partition_count,
                     md.undeleted_partition_count))
        return md.partition_count - 1

    async with Producer(cluster.bootstrap, partitioner=last) as producer:
        md = await producer.send("cp", b"v", key=b"k")
    assert md.partition == 3
    assert seen[0] == ("cp", 4, 4, 4)


async def test_unknown_topic_fails_after_delivery_timeout(cluster):
    async with Producer(cluster.bootstrap, delivery_timeout_ms=500, metadata_timeout_ms=500,
                        ) as producer:
        fut = producer.send("bad topic name!", b"v")
        with pytest.raises(Exception):
            await asyncio.wait_for(fut, 5)


async def test_consumer_assign_seek_position(cluster):
    await cluster.create_topic("seek", partitions=1, replication_factor=1)
    async with Producer(cluster.bootstrap) as producer:
        await asyncio.gather(*[producer.send("seek", b"%d" % i) for i in range(20)])
    tp = TopicPartition("seek", 0)
    consumer = Consumer(cluster.bootstrap, auto_offset_reset="latest", fetch_max_wait_ms=50)
    try:
        consumer.assign([tp])
        assert await consumer.position(tp) == 20
        assert await consumer.poll(0.2) == []
        consumer.seek(tp, 15)
        got = []
        while len(got) < 5:
            got += await consumer.poll(1.0)
        assert [r.value for r in got] == [b"15", b"16", b"17", b"18", b"19"]
        assert await consumer.position(tp) == 20
        consumer.seek_to_beginning(tp)
        assert await consumer.position(tp) == 0
        first = await consumer.poll(1.0)
        assert first[0].offset == 0 and first[0].value == b"0"
        consumer.seek_to_end(tp)
        assert await consumer.position(tp) == 20
    finally:
        await consumer.close()


async def test_consumer_skips_records_before_position_in_compressed_batch(cluster):
    await cluster.create_topic("mid", partitions=1, replication_factor=1)
    async with Producer(cluster.bootstrap, compression="gzip", linger_ms=50) as producer:
        mds = await asyncio.gather(*[producer.send("mid", b"%d" % i) for i in range(10)])
    assert [m.offset for m in mds] == list(range(10))
    tp = TopicPartition("mid", 0)
    consumer = Consumer(cluster.bootstrap, fetch_max_wait_ms=50)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 7)
        got = []
        while len(got) < 3:
            got += await consumer.poll(1.0)
        assert [r.offset for r in got] == [7, 8, 9]
    finally:
        await consumer.close()


async def test_leader_stopped_mid_stream_acks_all_loses_nothing_acked(cluster):
    await cluster.create_topic("fo", partitions=3, replication_factor=3)
    producer = Producer(cluster.bootstrap, acks="all", linger_ms=2, retry_backoff_ms=20,
                        delivery_timeout_ms=8000, request_timeout_ms=2000)
    await producer.start()
    acked: list[tuple[int, int, bytes]] = []
    failed = 0
    errors: list[str] = []
    victim = await cluster.leader_of("fo", 0)
    try:
        futs = []
        for i in range(1500):
            futs.append((i, producer.send("fo", b"%06d" % i, key=b"k%d" % (i % 13))))
            if i == 500:
                await asyncio.sleep(0.05)
                await cluster.stop_broker(victim)
            if i % 100 == 0:
                await asyncio.sleep(0.01)
        for i, f in futs:
            try:
                md = await f
                acked.append((md.partition, md.offset, b"%06d" % i))
            except Exception as e:  # noqa: BLE001 - only acknowledged records must survive
                failed += 1
                errors.append(repr(e))
    finally:
        await producer.stop()
    assert len(acked) >= 1400, f"only {len(acked)} acked, {failed} failed: {sorted(set(errors))[:5]}"
    consumed = await consume_all(cluster.bootstrap, "fo", 3, len(acked), timeout=6)
    at = {(r.partition, r.offset): r.value for r in consumed}
    for p, o, v in acked:
        assert at.get((p, o)) == v, f"acked ({p}, {o}) lost or different"
