"""confluent-kafka 2.16 (librdkafka 2.16), called in-process."""
from __future__ import annotations

import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, ConfigResource, NewPartitions, NewTopic,
                                   OffsetSpec, ResourceType)

from conformance.rdlog import LOG

from . import DriverError

NAME = "confluent"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
MISSING_CODECS: dict[str, str] = {}
HAS_ADMIN = True
HAS_IDEMPOTENCE = True


def _admin(bs):
    return AdminClient({"bootstrap.servers": bs, "client.id": "conformance-confluent-admin",
                        "reconnect.backoff.max.ms": 500, "logger": LOG})


def _wait(admin, futures: dict, timeout: float):
    """Wait for admin futures; ``admin`` is passed to keep the handle alive meanwhile."""
    out = {}
    for k, f in futures.items():
        try:
            out[k] = f.result(timeout=timeout)
        except KafkaException as e:
            raise DriverError(f"{k}: {e}") from e
    del admin
    return out


def create_topic(bs, name, partitions, rf, configs=None, timeout: float = 30) -> None:
    admin = _admin(bs)
    _wait(admin, admin.create_topics([NewTopic(name, partitions, rf, config=configs or {})],
                                   operation_timeout=timeout, request_timeout=timeout), timeout)


def produce(bs, topic, records, codec, acks="all", idempotent=False, timeout: float = 60,
            **extra):
    conf = {"bootstrap.servers": bs, "client.id": "conformance-confluent", "acks": acks,
            "compression.type": codec, "enable.idempotence": idempotent, "linger.ms": 5,
            "message.timeout.ms": int(timeout * 1000), "reconnect.backoff.max.ms": 500,
            "logger": LOG}
    conf.update(extra)
    producer = Producer(conf)
    results: list = [None] * len(records)

    def report(i):
        def cb(err, msg):
            results[i] = err if err is not None else (msg.partition(), msg.offset())
        return cb

    deadline = time.monotonic() + timeout
    for i, (k, v) in enumerate(records):
        while True:
            try:
                producer.produce(topic, key=k, value=v, on_delivery=report(i))
                break
            except BufferError:
                if time.monotonic() > deadline:
                    raise DriverError("producer queue stayed full") from None
                producer.poll(0.05)
    left = producer.flush(max(0.1, deadline - time.monotonic()))
    if left:
        raise DriverError(f"{left} messages undelivered after {timeout}s")
    errors = [r for r in results if not isinstance(r, tuple)]
    if errors:
        raise DriverError(f"{len(errors)} delivery errors, first: {errors[0]}")
    return results


def _consumer(bs):
    return Consumer({"bootstrap.servers": bs, "client.id": "conformance-confluent",
                     "group.id": "conformance-confluent-unused", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "fetch.wait.max.ms": 200,
                     "reconnect.backoff.max.ms": 500, "logger": LOG})


def consume_assigned(bs, topic, partitions, expected_count, timeout: float = 30):
    consumer = _consumer(bs)
    out = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        deadline = time.monotonic() + timeout
        while len(out) < expected_count and time.monotonic() < deadline:
            for m in consumer.consume(num_messages=500, timeout=0.2):
                if m.error():
                    raise DriverError(f"consume: {m.error()}")
                out.append((m.partition(), m.offset(), m.key(), m.value()))
        return out
    finally:
        consumer.close()


def list_offsets(bs, topic, timeout: float = 30):
    n = partition_count(bs, topic, timeout)
    admin = _admin(bs)
    res = {}
    for spec, idx in ((OffsetSpec.earliest(), 0), (OffsetSpec.latest(), 1)):
        req = {TopicPartition(topic, p): spec for p in range(n)}
        found = _wait(admin, admin.list_offsets(req, request_timeout=timeout), timeout)
        for tp, info in found.items():
            res.setdefault(tp.partition, [None, None])[idx] = info.offset
    return {p: tuple(v) for p, v in sorted(res.items())}


def partition_count(bs, topic, timeout: float = 30) -> int:
    md = _admin(bs).list_topics(topic=topic, timeout=timeout)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        raise DriverError(f"metadata {topic}: {t and t.error}")
    return len(t.partitions)


def describe_configs(bs, topic, timeout: float = 30) -> dict[str, str]:
    admin = _admin(bs)
    res = _wait(admin, admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)],
                                            request_timeout=timeout), timeout)
    (entries,) = res.values()
    return {name: e.value for name, e in entries.items()}


def create_partitions(bs, topic, total, timeout: float = 30) -> None:
    admin = _admin(bs)
    _wait(admin, admin.create_partitions([NewPartitions(topic, total)],
                                       operation_timeout=timeout, request_timeout=timeout), timeout)


def delete_topic(bs, topic, timeout: float = 30) -> None:
    admin = _admin(bs)
    _wait(admin, admin.delete_topics([topic], operation_timeout=timeout, request_timeout=timeout),
          timeout)


def list_topics(bs, timeout: float = 30) -> set[str]:
    return set(_admin(bs).list_topics(timeout=timeout).topics)


# ------------------------------------------------------------------ consumer groups
from ._group import HEARTBEAT_INTERVAL_MS, POLL_S, SESSION_TIMEOUT_MS, GroupMemberBase  # noqa: E402


class GroupMember(GroupMemberBase):
    """A subscribed librdkafka consumer, classic protocol (``group.protocol=classic``) with the
    eager range/roundrobin assignors, committing each batch synchronously."""

    def _loop(self) -> None:
        consumer = Consumer({
            "bootstrap.servers": self.bs, "client.id": f"conformance-confluent-{self.name}",
            "group.id": self.group, "group.protocol": "classic",
            "partition.assignment.strategy": "range,roundrobin",
            "enable.auto.commit": False, "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": SESSION_TIMEOUT_MS,
            "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS, "fetch.wait.max.ms": 200,
            "reconnect.backoff.max.ms": 500, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000, "logger": LOG})

        def on_assign(c, tps):
            self.assigned(tp.partition for tp in tps)

        def on_revoke(c, tps):
            self.revoked(tp.partition for tp in tps)

        try:
            consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
            while not self.stopping.is_set():
                seen = []
                for m in consumer.consume(num_messages=500, timeout=POLL_S):
                    if m.error():
                        self.commit_failed(m.error())   # transient consume errors are logged
                        continue
                    self.got(m.partition(), m.offset(), m.key(), m.value())
                    seen.append((m.partition(), m.offset()))
                if seen and self.commit_enabled:
                    offsets = self.next_offsets(seen)
                    try:
                        res = consumer.commit(offsets=[TopicPartition(self.topic, p, o)
                                                       for p, o in offsets.items()],
                                              asynchronous=False)
                        bad = [tp for tp in res or [] if tp.error is not None]
                        if bad:
                            raise DriverError(f"commit: {bad}")
                    except Exception as e:  # noqa: BLE001 — at-least-once: redelivered later
                        self.commit_failed(e)
                    else:
                        self.committed(offsets)
        finally:
            consumer.close()
