"""Exactly-once consume-transform-produce (KIP-98/KIP-447) with confluent-kafka, through failures.

100k input records are read at read_committed by a group member and transformed into an output
topic in transactions that also commit the consumed offsets (send_offsets_to_transaction). Midway
the leader of an output partition is stopped; later (that broker back) the broker coordinating the
transactional id. The group's committed offsets (written only by TxnOffsetCommit, made visible by
the transactions' markers) end at the inputs' end. The loop is the one librdkafka documents: a
retriable commit error retries the commit, an abortable one aborts and rewinds the consumer to its
committed offsets. The output read at read_committed must hold every input exactly once; aborted
attempts may leave records only a read_uncommitted reader sees.

The three roles sit on three different brokers: the group's coordinator on one never stopped, the
output leader and the transaction coordinator on the other two. librdkafka (up to 2.16 at least)
hangs in send_offsets_to_transaction, past its timeout, when the group coordinator it has cached
is a broker that left the metadata (confluentinc/librdkafka#5511, #5456): with the group on a
stopped broker this test hung about one run in six, whatever the broker answers.

Needs broker control: an in-process ThreadedCluster (not the `cluster` subprocess fixture).
"""
from __future__ import annotations

import time

import pytest

from minibroker.coordinator.offsets import partition_for
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.fault, pytest.mark.clients("confluent"), pytest.mark.timeout(300)]

N = 100_000
PARTITIONS = 4
TXN_STATE_PARTITIONS = OFFSETS_PARTITIONS = 4
TID = "eos-transformer"
OUTPUT = "out"
IO_TIMEOUT = 30.0
RUN_TIMEOUT_S = 200


def _rewind(consumer) -> None:
    from confluent_kafka import OFFSET_BEGINNING
    assignment = consumer.assignment()
    for tp in consumer.committed(assignment, IO_TIMEOUT):
        tp.offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        consumer.seek(tp)


def _coordinator_broker(c: ThreadedCluster, topic: str, key: str) -> int:
    """The leader of `key`'s partition of __transaction_state or __consumer_offsets."""
    return c.leader_of(topic, partition_for(key, TXN_STATE_PARTITIONS if topic.startswith(
        "__transaction") else OFFSETS_PARTITIONS))


def _place(c: ThreadedCluster) -> tuple[str, int]:
    """(group id, output partition to fail): the group's coordinator is neither the transaction
    coordinator's broker nor that partition's leader, so no stop moves it."""
    from confluent_kafka import Consumer, TopicPartition
    probe = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "eos-probe"})
    try:        # creates __consumer_offsets (FindCoordinator) and waits for its leaders
        probe.committed([TopicPartition("in", 0)], IO_TIMEOUT)
    finally:
        probe.close()
    txn_broker = _coordinator_broker(c, "__transaction_state", TID)
    leaders = {c.leader_of(OUTPUT, p): p for p in reversed(range(PARTITIONS))}
    for i in range(100):
        group = f"eos-group-{i}"
        g = _coordinator_broker(c, "__consumer_offsets", group)
        other = [b for b in sorted(leaders) if b not in (g, txn_broker)]
        if g != txn_broker and other:
            return group, leaders[other[0]]
    raise AssertionError(f"no group placement off brokers {sorted(leaders)} and {txn_broker}")


def _transform(c: ThreadedCluster, stops: list[str]) -> tuple[int, str]:
    """Run the loop until N inputs are committed; returns how many transactions aborted and the
    group id used."""
    from confluent_kafka import Consumer, KafkaException, Producer
    producer = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": TID,
                         "linger.ms": 5, "transaction.timeout.ms": 60000})
    producer.init_transactions(IO_TIMEOUT)      # creates __transaction_state
    group, failed_partition = _place(c)
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["in"])
    committed = aborted = 0
    stopped: list[int] = []
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        while committed < N:
            assert time.monotonic() < deadline, f"only {committed} of {N} inputs committed"
            msgs = [m for m in consumer.consume(2000, 0.5) if not m.error()]
            if not msgs:
                continue
            try:
                producer.begin_transaction()
                for m in msgs:
                    producer.produce(OUTPUT, key=m.key(), value=b"out-" + m.value())
                producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                     consumer.consumer_group_metadata(), IO_TIMEOUT)
                while True:
                    try:
                        producer.commit_transaction(IO_TIMEOUT)
                        break
                    except KafkaException as e:
                        if not e.args[0].retriable():
                            raise
            except KafkaException as e:
                if not e.args[0].txn_requires_abort():
                    raise
                producer.abort_transaction(IO_TIMEOUT)
                _rewind(consumer)
                aborted += 1
                continue
            committed += len(msgs)
            if stops and committed >= N * (3 - len(stops)) // 4:
                _fail(c, stops.pop(0), stopped, failed_partition)
    finally:
        consumer.close()
    return aborted, group


def _fail(c: ThreadedCluster, what: str, stopped: list[int], partition: int) -> None:
    if what == "output leader":
        stopped.append(c.leader_of(OUTPUT, partition))
        c.stop_broker(stopped[-1])
    else:       # the transaction coordinator's broker, once the first one is back
        c.start_broker(stopped[-1])
        c.stop_broker(_coordinator_broker(c, "__transaction_state", TID))


def _committed_offsets(c: ThreadedCluster, group: str) -> list[int]:
    """The group's offsets, committed only through its transactions' markers."""
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in consumer.committed(
            [TopicPartition("in", p) for p in range(PARTITIONS)], IO_TIMEOUT)]
    finally:
        consumer.close()


def _read_committed_output(c: ThreadedCluster) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "eos-verify",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(OUTPUT, p, 0) for p in range(PARTITIONS)])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            batch = [m.value() for m in consumer.consume(5000, 0.5) if not m.error()]
            got += batch
            if len(got) >= N:       # keep reading a little: a duplicate would show up now
                quiet_until = quiet_until or time.monotonic() + 2.0
                if time.monotonic() > quiet_until:
                    break
    finally:
        consumer.close()
    return got


def test_exactly_once_through_leader_and_coordinator_failures():
    from confluent_kafka import Producer
    with ThreadedCluster(brokers=3, offsets_topic_num_partitions=OFFSETS_PARTITIONS,
                         transaction_state_log_num_partitions=TXN_STATE_PARTITIONS,
                         group_initial_rebalance_delay_ms=0) as c:
        c.create_topic("in", PARTITIONS, 3)
        c.create_topic(OUTPUT, PARTITIONS, 3)
        p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 20, "acks": "all"})
        for i in range(N):
            p.produce("in", value=b"%d" % i, partition=i % PARTITIONS)
            if i % 10000 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        stops = ["output leader", "coordinator"]
        aborted, group = _transform(c, stops)
        assert stops == [], f"failures not injected: {stops}"
        assert _committed_offsets(c, group) == [N // PARTITIONS] * PARTITIONS   # TxnOffsetCommit's
        got = _read_committed_output(c)
        counts: dict[bytes, int] = {}
        for v in got:
            counts[v] = counts.get(v, 0) + 1
        duplicated = sorted(v for v, n in counts.items() if n > 1)[:5]
        missing = [i for i in range(N) if counts.get(b"out-%d" % i, 0) == 0][:5]
        assert (len(got), duplicated, missing) == (N, [], []), f"{aborted} transactions aborted"
        print(f"exactly-once: {N} inputs, {len(got)} outputs at read_committed, "
              f"{aborted} transactions aborted and retried")
