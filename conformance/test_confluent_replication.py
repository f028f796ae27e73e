"""confluent-kafka (librdkafka) against `minibroker serve` where issue 45 item 6 saw it fail.

- The ~40 s idempotent-producer stall: followers in one process that fell behind fetched, in one
  record set, a small batch (the leader keeps it as bytes) beside a large one (kept as a view);
  the memory pipe hands the views over and copies the bytes with the frame, and the follower's
  decoder refused that set on every fetch. acks=all then waited until replica.lag.time.max.ms
  took the followers out of the ISR, while librdkafka spun on its five requests in flight. Here
  the followers are held behind (`faults hold --api Fetch`) while a small and a large batch are
  produced, so their next fetch carries both; with replica.lag.time.max.ms at 60 s an acks=all
  record is delivered within message.timeout.ms only if the followers take that fetch.
- AdminClient.delete_records: librdkafka looks the leaders up with a Metadata request and sends
  DeleteRecords v2 to each; every partition is answered at once with its new low watermark, also
  while a leader's followers are held behind (an offset above its high watermark is
  OFFSET_OUT_OF_RANGE, as Kafka answers), and the log start offsets moved.
"""
from __future__ import annotations

import shlex
import subprocess
import sys
import time

import pytest

from conformance import rdlog
from conformance.conftest import served_cluster

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # noqa: E402

pytestmark = pytest.mark.clients("confluent")

CMD = (f"{shlex.quote(sys.executable)} -m minibroker serve --brokers 3 --port 0 --faults "
       "--override replica.lag.time.max.ms=60000")
DEADLINE_S = 60
LARGE = 100_000         # a batch kept as a view, more than a memory pipe hands over by reference


@pytest.fixture(scope="module")
def bs():
    with served_cluster(CMD) as served:
        yield served.bootstrap


def faults(bs: str, *args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "minibroker", "faults", "--bootstrap-server", bs,
                        *args], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def create(admin: AdminClient, name: str, partitions: int) -> dict[int, int]:
    """Create `name` with RF 3; {partition: leader} once every partition has one."""
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(DEADLINE_S)
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        t = admin.list_topics(name, timeout=10).topics[name]
        leaders = {p.id: p.leader for p in t.partitions.values()}
        if len(leaders) == partitions and min(leaders.values()) > 0:
            return leaders
        time.sleep(0.2)
    raise AssertionError(f"{name} has no leaders")


def produce(bs: str, topic: str, values: list[tuple[int, bytes]], **conf) -> list:
    """Produce (partition, value) pairs one flush each; the delivered offsets (or errors)."""
    out: list = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, **conf}, logger=rdlog.LOG)
    for partition, value in values:
        p.produce(topic, value, partition=partition,
                  on_delivery=lambda err, msg: out.append(err or msg.offset()))
        assert p.flush(DEADLINE_S) == 0
    return out


def held_behind(bs: str, leader: int) -> None:
    """Hold every Fetch `leader` gets from now on; the followers' fetch in flight (a long poll
    of replica.fetch.wait.max.ms, 500 ms) is answered before their next one is held."""
    faults(bs, "hold", "--api", "Fetch", "--broker", str(leader))
    time.sleep(1.5)


def test_idempotent_acks_all_is_delivered_after_followers_fetch_small_and_large_batches(bs):
    admin = AdminClient({"bootstrap.servers": bs}, logger=rdlog.LOG)
    topic = "stall-mixed"
    [leader] = create(admin, topic, 1).values()
    assert produce(bs, topic, [(0, b"first")], acks="1") == [0]
    held_behind(bs, leader)
    try:
        assert produce(bs, topic, [(0, b"small"), (0, b"L" * LARGE)], acks="1") == [1, 2]
    finally:
        faults(bs, "clear")          # the rule off, the held fetch handled
    # REQUEST_TIMED_OUT after request.timeout.ms, retried, until message.timeout.ms: then the
    # delivery report is an error instead of offset 3.
    assert produce(bs, topic, [(0, b"last")], **{
        "enable.idempotence": True, "acks": "all", "request.timeout.ms": 10000,
        "message.timeout.ms": 20000}) == [3]


def test_delete_records_is_answered_per_partition_also_while_followers_are_behind(bs):
    admin = AdminClient({"bootstrap.servers": bs}, logger=rdlog.LOG)
    topic = "delete-records"
    leaders = create(admin, topic, 6)
    produce(bs, topic, [(i % 6, b"v%d" % i) for i in range(60)],
            **{"enable.idempotence": True, "acks": "all"})
    done = admin.delete_records([TopicPartition(topic, p, 4) for p in range(6)],
                                request_timeout=30)
    assert sorted((tp.partition, f.result().low_watermark) for tp, f in done.items()) == \
        [(p, 4) for p in range(6)]
    # One leader's followers held behind: its high watermark stays at 10 while it takes 2 more.
    slow = leaders[0]
    held_behind(bs, slow)
    try:
        assert produce(bs, topic, [(0, b"a"), (0, b"b")], acks="1") == [10, 11]
        done = admin.delete_records([TopicPartition(topic, 0, 12)] + [
            TopicPartition(topic, p, -1) for p in range(1, 6)], request_timeout=30)
        got = {}
        for tp, f in done.items():
            try:
                got[tp.partition] = f.result().low_watermark
            except KafkaException as e:
                got[tp.partition] = e.args[0].name()
        assert got == {0: "OFFSET_OUT_OF_RANGE", **{p: 10 for p in range(1, 6)}}
        done = admin.delete_records([TopicPartition(topic, 0, -1)], request_timeout=30)
        assert [f.result().low_watermark for f in done.values()] == [10]    # its HW
    finally:
        faults(bs, "clear")          # the rule off, the held fetch handled
    earliest = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.earliest()
                                   for p in range(6)}, request_timeout=30)
    assert sorted((tp.partition, f.result().offset) for tp, f in earliest.items()) == \
        [(p, 10) for p in range(6)]
