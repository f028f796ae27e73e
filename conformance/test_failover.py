"""A partition leader is stopped while a real client produces with acks=all: the client fails
over to the new leader, and every record it saw acknowledged is read back afterwards, byte-exact,
at the offset it was acknowledged at. Clients: kafka-python and librdkafka (confluent-kafka).

Needs broker control, so it runs an in-process ``minibroker.testing.ThreadedCluster`` (not the
``cluster`` subprocess fixture)."""
from __future__ import annotations

import threading
import time
import zlib

import pytest

from conformance import checks
from conformance.drivers import load
from conformance.rdlog import LOG

from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.fault, pytest.mark.timeout(150)]

BROKERS = 3
PARTITIONS = 3
N_RECORDS = 1500
STOP_AFTER = 400          # stop the leader (in the background) once this many records are sent
SEND_PAUSE_EVERY = 25     # pause briefly every N sends so the stream spans the failover
SEND_PAUSE_S = 0.01
DELIVERY_TIMEOUT_S = 40   # each client's own bound on retrying one record
IO_TIMEOUT = 30.0


class Stream:
    """What one produce stream saw: acks {index: (partition, offset)}, failures, stop timing."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked: dict[int, tuple[int, int]] = {}
        self.failed: dict[int, str] = {}
        self.stopped = threading.Event()
        self.sent_after_stop: set[int] = set()
        self.stop_error: list[BaseException] = []

    def ack(self, i, partition, offset):
        with self.lock:
            self.acked[i] = (partition, offset)

    def fail(self, i, err):
        with self.lock:
            self.failed[i] = str(err)


def _stopper(tc, broker_id, stream: Stream):
    def run():
        try:
            tc.stop_broker(broker_id)
        except BaseException as e:  # noqa: BLE001 — reported to the test thread
            stream.stop_error.append(e)
        finally:
            stream.stopped.set()
    return threading.Thread(target=run, name="conformance-stop-leader", daemon=True)


def _send_loop(send, poll, records, stopper, stream: Stream):
    deadline = time.monotonic() + 60
    for i, (k, v) in enumerate(records):
        if time.monotonic() > deadline:
            break
        if i == STOP_AFTER:
            stopper.start()
        if stream.stopped.is_set():
            stream.sent_after_stop.add(i)
        send(i, k, v)
        if i % SEND_PAUSE_EVERY == 0:
            poll()
            time.sleep(SEND_PAUSE_S)


def produce_kafka_python(bs, topic, records, stopper, stream: Stream):
    from kafka import KafkaProducer
    producer = KafkaProducer(bootstrap_servers=bs, client_id="conformance-failover-kafka-python",
                             acks=-1, linger_ms=2, request_timeout_ms=5000,
                             delivery_timeout_ms=DELIVERY_TIMEOUT_S * 1000, max_block_ms=20000,
                             retry_backoff_ms=100, reconnect_backoff_max_ms=500)

    def send(i, k, v):
        fut = producer.send(topic, key=k, value=v)
        fut.add_callback(lambda md, i=i: stream.ack(i, md.partition, md.offset))
        fut.add_errback(lambda e, i=i: stream.fail(i, e))

    try:
        _send_loop(send, lambda: None, records, stopper, stream)
        producer.flush(timeout=DELIVERY_TIMEOUT_S + 10)
    finally:
        producer.close(timeout=5)


def produce_confluent(bs, topic, records, stopper, stream: Stream):
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bs, "client.id": "conformance-failover-confluent",
                         "acks": "all", "linger.ms": 2, "request.timeout.ms": 5000,
                         "message.timeout.ms": DELIVERY_TIMEOUT_S * 1000,
                         "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500,
                         "topic.metadata.refresh.interval.ms": 1000, "logger": LOG})

    def send(i, k, v):
        def report(err, msg, i=i):
            if err is None:
                stream.ack(i, msg.partition(), msg.offset())
            else:
                stream.fail(i, err)
        for _ in range(200):
            try:
                producer.produce(topic, key=k, value=v, on_delivery=report)
                return
            except BufferError:
                producer.poll(0.05)
        stream.fail(i, "local queue full")

    _send_loop(send, lambda: producer.poll(0), records, stopper, stream)
    left = producer.flush(DELIVERY_TIMEOUT_S + 10)
    assert left == 0, f"{left} records neither acknowledged nor failed"


PRODUCERS = {"kafka_python": produce_kafka_python, "confluent": produce_confluent}


@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_acked_records_survive_leader_stop(client):
    records = checks.make_records(N_RECORDS, zlib.crc32(f"failover/{client}".encode()))
    topic = f"conf-failover-{client}"
    with ThreadedCluster(brokers=BROKERS) as tc:
        tc.create_topic(topic, PARTITIONS, BROKERS)
        leader = tc.leader_of(topic, 0)
        led = {p for p in range(PARTITIONS) if tc.leader_of(topic, p) == leader}
        stream = Stream()
        PRODUCERS[client](tc.bootstrap, topic, records, _stopper(tc, leader, stream), stream)
        assert stream.stopped.wait(30), "stop_broker did not return"
        assert not stream.stop_error, stream.stop_error

        acked_after = [i for i in stream.sent_after_stop
                       if i in stream.acked and stream.acked[i][0] in led]
        assert stream.sent_after_stop, "the stream ended before the leader was stopped"
        assert acked_after, (f"no record sent after stopping broker {leader} to its partitions "
                             f"{sorted(led)} was acknowledged; failures: "
                             f"{list(stream.failed.items())[:5]}")
        assert all(tc.leader_of(topic, p) != leader for p in led)

        d = load(client)
        ends = d.list_offsets(tc.bootstrap, topic, timeout=IO_TIMEOUT)
        total = sum(hi - lo for lo, hi in ends.values())
        consumed = d.consume_assigned(tc.bootstrap, topic, list(range(PARTITIONS)), total,
                                      timeout=IO_TIMEOUT)
        at = {(p, o): (k, v) for p, o, k, v in consumed}
        missing = [(i, pos) for i, pos in sorted(stream.acked.items())
                   if at.get(pos) != records[i]]
        assert not missing, (f"{len(missing)} of {len(stream.acked)} acknowledged records not read "
                             f"back where acknowledged, first: {missing[:5]}")
        # Same key, same partition, for the acknowledged records.
        part_of: dict[bytes, set[int]] = {}
        for i, (p, _) in stream.acked.items():
            part_of.setdefault(records[i][0], set()).add(p)
        assert all(len(ps) == 1 for ps in part_of.values()), part_of
