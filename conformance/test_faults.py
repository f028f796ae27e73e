"""Faults on demand from outside the process: `minibroker serve --faults` driven by the
`minibroker faults` CLI while a real client (kafka-python) observes each fault.

- Injected NOT_LEADER_OR_FOLLOWER errors on Produce are retried by the client: the record is
  acknowledged once, stored once, and the error stack is used up.
- A network partition cutting a follower off shrinks the ISR (acks=all with
  min.insync.replicas=3 then fails NOT_ENOUGH_REPLICAS, as the client sees), and healing it
  brings the follower back (acks=all succeeds again); every acknowledged record is readable.

The cluster runs with short replica.lag.time.max.ms / broker.session.timeout.ms so this takes
seconds of real time.
"""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, NotEnoughReplicasError

from conformance.conftest import served_cluster

pytestmark = pytest.mark.clients("kafka_python")

CMD = (f"{shlex.quote(sys.executable)} -m minibroker serve --brokers 3 --port 0 --faults "
       "--override replica.lag.time.max.ms=1500 --override broker.session.timeout.ms=3000 "
       "--override broker.heartbeat.interval.ms=500")
DEADLINE_S = 60


@pytest.fixture(scope="module")
def bs():
    with served_cluster(CMD) as served:
        yield served.bootstrap


def faults(bs: str, *args: str) -> tuple[int, dict]:
    """Run `minibroker faults`; (the active controller, what is armed)."""
    r = subprocess.run([sys.executable, "-m", "minibroker", "faults", "--bootstrap-server", bs,
                        *args], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    head, _, body = r.stdout.partition("\n{")
    controller = int(head.rsplit("controller: ", 1)[1].split()[0])
    return controller, json.loads("{" + body)


def create(bs: str, name: str, configs: dict[str, str]) -> int:
    """Create name (1 partition, RF 3); its leader."""
    admin = KafkaAdminClient(bootstrap_servers=bs, client_id="faults-admin")
    try:
        admin.create_topics([NewTopic(name, 1, 3, topic_configs=configs)])
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end:
            [t] = admin.describe_topics([name])
            if t["partitions"] and t["partitions"][0]["leader_id"] >= 0:
                return t["partitions"][0]["leader_id"]
            time.sleep(0.2)
        raise AssertionError(f"{name} has no leader")
    finally:
        admin.close()


def read_all(bs: str, topic: str, wanted: list[bytes]) -> list[bytes]:
    """Every record of topic (partition 0) from the start, read until all of `wanted` came (or
    10 s without a record)."""
    consumer = KafkaConsumer(topic, bootstrap_servers=bs, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        out = []
        for msg in consumer:
            out.append(msg.value)
            if not set(wanted) - set(out):
                break
        return out
    finally:
        consumer.close()


def test_injected_not_leader_errors_are_retried_by_the_client(bs):
    topic = "faults-retried"
    create(bs, topic, {})
    producer = KafkaProducer(bootstrap_servers=bs, acks="all", retries=5, retry_backoff_ms=50,
                             client_id="faults-kafka-python")
    try:
        producer.send(topic, b"first").get(30)          # metadata known: errors hit Produce
        _, state = faults(bs, "error", "--api", "Produce", "--errors",
                          "NOT_LEADER_OR_FOLLOWER,NOT_LEADER_OR_FOLLOWER")
        assert state["errors"][0]["errors"] == ["NOT_LEADER_FOR_PARTITION"] * 2
        meta = producer.send(topic, b"second").get(30)
        assert meta.offset == 1
    finally:
        producer.close()
    assert faults(bs, "list")[1]["errors"] == []        # both answered, both retried
    assert read_all(bs, topic, [b"first", b"second"]) == [b"first", b"second"]


def test_a_partition_shrinks_the_isr_and_healing_restores_it(bs):
    topic = "faults-partitioned"
    leader = create(bs, topic, {"min.insync.replicas": "3"})
    cut = max(b for b in (1, 2, 3) if b != leader)
    producer = KafkaProducer(bootstrap_servers=bs, acks="all", retries=0,
                             request_timeout_ms=10000, client_id="faults-kafka-python")
    acked = []

    def produce(value: bytes) -> KafkaError | None:
        try:
            producer.send(topic, value).get(30)
        except KafkaError as e:
            return e
        acked.append(value)
        return None

    try:
        assert produce(b"before") is None
        _, state = faults(bs, "partition", str(cut), ",".join(str(b) for b in (1, 2, 3)
                                                              if b != cut))
        assert len(state["partitions"]) == 2
        refused, end, n = None, time.monotonic() + DEADLINE_S, 0
        while refused is None and time.monotonic() < end:
            n += 1
            err = produce(b"during-%d" % n)
            if isinstance(err, NotEnoughReplicasError):
                refused = err               # the ISR lost the cut-off follower
            time.sleep(0.2)
        assert refused is not None, f"acks=all never refused while broker {cut} was cut off"
        assert faults(bs, "heal")[1]["partitions"] == []
        end = time.monotonic() + DEADLINE_S
        while produce(b"after") is not None:
            assert time.monotonic() < end, "acks=all never succeeded again after healing"
            time.sleep(0.2)
    finally:
        producer.close()
        faults(bs, "clear")
    got = read_all(bs, topic, acked)
    assert [v for v in acked if v not in got] == []     # nothing acknowledged was lost
