"""Transactions (KIP-98) with real clients' transactional producers, over real sockets.

Each client commits [c0..c4], aborts [a0..a2] (sent before the abort, so they are in the log),
and commits [c5] into one partition. A read_committed consumer then sees exactly c0..c5 in order
(librdkafka and, for its own run, kafka-python's consumer), a read_uncommitted one all nine
records in order; a second producer with the same transactional id fences the first, whose next
transaction fails as the client reports it (the error is checked to be a fencing one).
"""
from __future__ import annotations

import asyncio
import json
import subprocess
import time

import pytest

from conformance.drivers import kafkajs as kafkajs_driver

pytestmark = pytest.mark.timeout(120)

COMMITTED = [b"c0", b"c1", b"c2", b"c3", b"c4", b"c5"]
ALL = [b"c0", b"c1", b"c2", b"c3", b"c4", b"a0", b"a1", b"a2", b"c5"]
IO_TIMEOUT = 30.0
FENCED_WORDS = ("fenced", "fence", "epoch")


def _create(bs: str, topic: str, rf: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, rf)])[topic].result(IO_TIMEOUT)


def _read(bs: str, topic: str, isolation: str, expected: int) -> list[bytes]:
    """Values of partition 0 from the start, at `isolation`, until `expected` or 20 s."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": f"txn-read-{isolation}",
                  "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and len(got) < expected:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
        if len(got) == expected:       # nothing more arrives after what was expected
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                m = c.poll(0.2)
                if m is not None and not m.error():
                    got.append(m.value())
    finally:
        c.close()
    return got


def _confluent(bs: str, topic: str, tid: str) -> str:
    from confluent_kafka import KafkaException, Producer
    conf = {"bootstrap.servers": bs, "transactional.id": tid}
    p1 = Producer(conf)
    p1.init_transactions(IO_TIMEOUT)
    for values, commit in ((COMMITTED[:5], True), (ALL[5:8], False), (COMMITTED[5:], True)):
        p1.begin_transaction()
        for v in values:
            p1.produce(topic, value=v, partition=0)
        p1.flush(IO_TIMEOUT)            # abort_transaction purges unsent messages: send first
        (p1.commit_transaction if commit else p1.abort_transaction)(IO_TIMEOUT)
    p2 = Producer(conf)
    p2.init_transactions(IO_TIMEOUT)
    try:
        p1.begin_transaction()
        p1.produce(topic, value=b"zombie", partition=0)
        p1.commit_transaction(IO_TIMEOUT)
    except KafkaException as e:
        assert e.args[0].fatal(), e
        return str(e)
    finally:
        p2.flush(1)
    return ""


def _kafka_python(bs: str, topic: str, tid: str) -> str:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    conf = dict(bootstrap_servers=bs, transactional_id=tid, enable_idempotence=True)
    p1 = KafkaProducer(**conf)
    p1.init_transactions()
    for values, commit in ((COMMITTED[:5], True), (ALL[5:8], False), (COMMITTED[5:], True)):
        p1.begin_transaction()
        for v in values:
            p1.send(topic, value=v, partition=0)
        p1.flush(IO_TIMEOUT)
        (p1.commit_transaction if commit else p1.abort_transaction)()
    p2 = KafkaProducer(**conf)
    p2.init_transactions()
    try:
        p1.begin_transaction()
        p1.send(topic, value=b"zombie", partition=0).get(IO_TIMEOUT)
        p1.commit_transaction()
    except KafkaError as e:
        return f"{type(e).__name__}: {e}"
    finally:
        p1.close(timeout=5)
        p2.close(timeout=5)
    return ""


def _aiokafka(bs: str, topic: str, tid: str) -> str:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError

    async def run() -> str:
        p1 = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=tid)
        await p1.start()
        try:
            for values, commit in ((COMMITTED[:5], True), (ALL[5:8], False), (COMMITTED[5:], True)):
                await p1.begin_transaction()
                for v in values:
                    await (await p1.send(topic, value=v, partition=0))
                await (p1.commit_transaction() if commit else p1.abort_transaction())
            p2 = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=tid)
            await p2.start()
            try:
                await p1.begin_transaction()
                await (await p1.send(topic, value=b"zombie", partition=0))
                await p1.commit_transaction()
            except KafkaError as e:
                return f"{type(e).__name__}: {e}"
            finally:
                await p2.stop()
            return ""
        finally:
            try:
                await asyncio.wait_for(p1.stop(), 10)
            except Exception:  # noqa: BLE001 — a fenced producer may fail to stop cleanly
                pass
    return asyncio.run(asyncio.wait_for(run(), 90))


def _kafkajs(bs: str, topic: str, tid: str) -> str:
    why = kafkajs_driver.available()
    if why:
        pytest.fail(f"kafkajs: {why}")
    proc = subprocess.run(["node", "txn.js"], input=json.dumps(
        {"bootstrap": bs, "topic": topic, "transactionalId": tid}).encode(),
        capture_output=True, timeout=90, cwd=kafkajs_driver.NODE_DIR)
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    assert lines, proc.stderr.decode(errors="replace")[-2000:]
    res = json.loads(lines[-1])
    assert res["ok"], res.get("error")
    # kafkajs' own consumers, as the others' below: only the committed, or all, in order.
    assert ([v.encode() for v in res["committed"]], [v.encode() for v in res["all"]]) == \
        (COMMITTED, ALL)
    return res["fencedError"] or ""


PRODUCERS = {"confluent": _confluent, "kafka_python": _kafka_python, "aiokafka": _aiokafka,
             "kafkajs": _kafkajs}


@pytest.mark.parametrize("producer", sorted(PRODUCERS))
def test_commit_abort_isolation_and_fencing(cluster, producer):
    topic = cluster.topic_name(f"txn-{producer}")
    _create(cluster.bootstrap, topic, cluster.replication)
    fenced = PRODUCERS[producer](cluster.bootstrap, topic, f"tid-{topic}")
    assert any(w in fenced.lower() for w in FENCED_WORDS), \
        f"{producer}: the fenced producer's next transaction did not fail as fenced: {fenced!r}"
    assert _read(cluster.bootstrap, topic, "read_committed", len(COMMITTED)) == COMMITTED
    assert _read(cluster.bootstrap, topic, "read_uncommitted", len(ALL)) == ALL


@pytest.mark.clients("aiokafka")
def test_aiokafka_read_committed_consumer(cluster):
    """aiokafka's consumer filters aborted records too; read_uncommitted sees them."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    topic = cluster.topic_name("txn-aio-consumer")
    _create(cluster.bootstrap, topic, cluster.replication)
    _confluent(cluster.bootstrap, topic, f"tid-{topic}")

    async def read(isolation: str, want: int) -> list[bytes]:
        c = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, isolation_level=isolation,
                             enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition(topic, 0)])
            await c.seek_to_beginning()
            values: list[bytes] = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and len(values) < want:
                for records in (await c.getmany(timeout_ms=200)).values():
                    values += [r.value for r in records]
            return values
        finally:
            await c.stop()
    got = asyncio.run(read("read_committed", len(COMMITTED))), \
        asyncio.run(read("read_uncommitted", len(ALL)))
    assert got == (COMMITTED, ALL)


@pytest.mark.clients("kafka_python")
def test_kafka_python_read_committed_consumer(cluster):
    """kafka-python's own consumer filters the aborted records from the aborted-transaction list."""
    from kafka import KafkaConsumer, TopicPartition
    topic = cluster.topic_name("txn-kp-consumer")
    _create(cluster.bootstrap, topic, cluster.replication)
    _confluent(cluster.bootstrap, topic, f"tid-{topic}")
    got: dict[str, list[bytes]] = {}
    for isolation in ("read_committed", "read_uncommitted"):
        c = KafkaConsumer(bootstrap_servers=cluster.bootstrap, isolation_level=isolation,
                          enable_auto_commit=False)
        c.assign([TopicPartition(topic, 0)])
        c.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 20
        want = len(COMMITTED) if isolation == "read_committed" else len(ALL)
        while time.monotonic() < deadline and len(values) < want:
            for records in c.poll(timeout_ms=200).values():
                values += [r.value for r in records]
        c.close()
        got[isolation] = values
    assert got == {"read_committed": COMMITTED, "read_uncommitted": ALL}


@pytest.mark.clients("confluent")
def test_offsets_sent_to_a_transaction_count_only_when_it_commits(cluster):
    """TxnOffsetCommit: offsets pending until the marker; an abort drops them, a commit shows them."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    topic = cluster.topic_name("txn-offsets")
    _create(cluster.bootstrap, topic, cluster.replication)
    group = f"g-{topic}"
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"tid-{topic}"})
    p.init_transactions(IO_TIMEOUT)
    try:
        committed = []
        for offset, commit in ((5, False), (7, True)):
            p.begin_transaction()
            p.send_offsets_to_transaction([TopicPartition(topic, 0, offset)],
                                          consumer.consumer_group_metadata(), IO_TIMEOUT)
            (p.commit_transaction if commit else p.abort_transaction)(IO_TIMEOUT)
            [tp] = consumer.committed([TopicPartition(topic, 0)], IO_TIMEOUT)
            committed.append(tp.offset)
    finally:
        consumer.close()
    assert committed == [-1001, 7]          # -1001: librdkafka's "no committed offset"
