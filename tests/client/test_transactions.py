"""The reference client's transactions against an in-process 3-broker cluster: commit and abort,
read_committed vs read_uncommitted reference consumers, fencing by a second producer with the same
transactional id, and a consume-transform-produce loop with send_offsets_to_transaction."""
from __future__ import annotations

import asyncio

import kafka.errors as Errors
import pytest

from minibroker.client import Consumer, Producer, TopicPartition

from tests.client.test_producer_consumer import consume_all

pytestmark = pytest.mark.timeout(60)


async def _values(bs, topic, isolation, count, partitions=1):
    recs = await consume_all(bs, topic, partitions, count, timeout=4.0,
                             isolation_level=isolation)
    return [r.value for r in sorted(recs, key=lambda r: (r.partition, r.offset))]


async def test_commit_abort_and_isolation_levels(cluster):
    await cluster.create_topic("tx", partitions=2, replication_factor=3)
    async with Producer(cluster.bootstrap, transactional_id="ref-tx", linger_ms=1) as producer:
        with pytest.raises(Errors.IllegalStateError):
            producer.begin_transaction()              # init_transactions() first
        await producer.init_transactions()
        for values, commit in (([b"c0", b"c1", b"c2"], True), ([b"a0", b"a1"], False),
                               ([b"c3"], True)):
            producer.begin_transaction()
            futs = [producer.send("tx", v, partition=p) for v in values for p in (0, 1)]
            await asyncio.gather(*futs)              # in the log before the abort
            await (producer.commit_transaction() if commit else producer.abort_transaction())
        outside = producer.send("tx", b"x", partition=0)
        with pytest.raises(Errors.IllegalStateError):
            await outside                             # no transaction in progress
    committed = [b"c0", b"c1", b"c2", b"c3"]
    everything = [b"c0", b"c1", b"c2", b"a0", b"a1", b"c3"]
    assert await _values(cluster.bootstrap, "tx", "read_committed", 8, 2) == committed * 2
    assert await _values(cluster.bootstrap, "tx", "read_uncommitted", 12, 2) == everything * 2


async def test_second_producer_fences_the_first(cluster):
    await cluster.create_topic("fence", partitions=1, replication_factor=3)
    async with Producer(cluster.bootstrap, transactional_id="ref-fence") as p1, \
            Producer(cluster.bootstrap, transactional_id="ref-fence") as p2:
        await p1.init_transactions()
        p1.begin_transaction()
        await p1.send("fence", b"p1-open", partition=0)
        await p2.init_transactions()                  # bumps the epoch; p1's transaction aborts
        with pytest.raises((Errors.ProducerFencedError, Errors.InvalidProducerEpochError)):
            await p1.send("fence", b"p1-late", partition=0)
        with pytest.raises(Errors.ProducerFencedError):
            await p1.commit_transaction()            # unusable from now on
        with pytest.raises(Errors.ProducerFencedError):
            p1.begin_transaction()
        p2.begin_transaction()
        await p2.send("fence", b"p2", partition=0)
        await p2.commit_transaction()
    assert await _values(cluster.bootstrap, "fence", "read_committed", 1) == [b"p2"]


async def test_consume_transform_produce(cluster):
    n = 300
    await cluster.create_topic("ctp-in", partitions=2, replication_factor=3)
    await cluster.create_topic("ctp-out", partitions=2, replication_factor=3)
    async with Producer(cluster.bootstrap) as plain:
        await asyncio.gather(*[plain.send("ctp-in", b"%d" % i, key=b"k%d" % (i % 7))
                               for i in range(n)])
    consumer = Consumer(cluster.bootstrap, group_id="ctp", auto_offset_reset="earliest",
                        enable_auto_commit=False, isolation_level="read_committed",
                        fetch_max_wait_ms=100, max_poll_records=40)
    consumer.subscribe(["ctp-in"])
    done, rounds, aborted = 0, 0, 0
    loop = asyncio.get_running_loop()
    end = loop.time() + 20
    try:
        async with Producer(cluster.bootstrap, transactional_id="ref-ctp") as producer:
            await producer.init_transactions()
            while done < n and loop.time() < end:
                recs = await consumer.poll(0.5)
                if not recs:
                    continue
                producer.begin_transaction()
                for r in recs:
                    producer.send("ctp-out", r.value + b"!", key=r.key)
                nxt = {}
                for r in recs:
                    nxt[TopicPartition(r.topic, r.partition)] = r.offset + 1
                await producer.send_offsets_to_transaction(nxt, consumer.group_metadata())
                # Every other round is aborted: its input is consumed again from the committed
                # offsets, so the output still holds each input exactly once.
                if rounds % 2:
                    await producer.abort_transaction()
                    aborted += 1
                    for tp in nxt:
                        at = await consumer.committed(tp)
                        if at is None:
                            consumer.seek_to_beginning(tp)
                        else:
                            consumer.seek(tp, at)
                else:
                    await producer.commit_transaction()
                    done += len(recs)
                rounds += 1
    finally:
        await consumer.close()
    assert done == n and aborted >= 1
    out = await _values(cluster.bootstrap, "ctp-out", "read_committed", n, 2)
    assert sorted(out) == sorted(b"%d!" % i for i in range(n))
    check = Consumer(cluster.bootstrap, group_id="ctp")
    try:
        committed = [await check.committed(TopicPartition("ctp-in", p)) for p in range(2)]
    finally:
        await check.close()
    assert sum(committed) == n
