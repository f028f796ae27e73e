"""kafka-python 3.0.12, called in-process."""
from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic

from . import DriverError

NAME = "kafka_python"
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
MISSING_CODECS: dict[str, str] = {}
HAS_ADMIN = True
HAS_IDEMPOTENCE = True

_COMMON = dict(request_timeout_ms=15000, reconnect_backoff_max_ms=500)


def _admin(bs: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bs, client_id="conformance-kafka-python-admin", **_COMMON)


def create_topic(bs: str, name: str, partitions: int, rf: int, configs: dict | None = None,
                 timeout: float = 30) -> None:
    admin = _admin(bs)
    try:
        admin.create_topics([NewTopic(name, partitions, rf, topic_configs=configs or {})],
                            timeout_ms=int(timeout * 1000))
    finally:
        admin.close()


def produce(bs, topic, records, codec, acks="all", idempotent=False, timeout: float = 60,
            **extra):
    producer = KafkaProducer(
        bootstrap_servers=bs, client_id="conformance-kafka-python",
        acks=-1 if acks == "all" else int(acks),
        compression_type=None if codec == "none" else codec,
        enable_idempotence=idempotent, linger_ms=5, max_block_ms=int(timeout * 1000),
        **{**_COMMON, **extra})
    try:
        futures = [producer.send(topic, key=k, value=v) for k, v in records]
        producer.flush(timeout=timeout)
        out = []
        for f in futures:
            md = f.get(timeout=max(0.1, timeout))
            out.append((md.partition, md.offset))
        return out
    finally:
        producer.close(timeout=5)


def _consumer(bs: str) -> KafkaConsumer:
    return KafkaConsumer(bootstrap_servers=bs, client_id="conformance-kafka-python", group_id=None,
                         enable_auto_commit=False, auto_offset_reset="earliest",
                         fetch_max_wait_ms=200, **_COMMON)


def consume_assigned(bs, topic, partitions, expected_count, timeout: float = 30):
    consumer = _consumer(bs)
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expected_count and time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=200)
            for tp in sorted(batch, key=lambda t: t.partition):
                for m in batch[tp]:
                    out.append((m.partition, m.offset, m.key, m.value))
        return out
    finally:
        consumer.close()


def list_offsets(bs, topic, timeout: float = 30):
    consumer = _consumer(bs)
    try:
        parts = consumer.partitions_for_topic(topic)
        deadline = time.monotonic() + timeout
        while not parts and time.monotonic() < deadline:
            time.sleep(0.2)
            parts = consumer.partitions_for_topic(topic)
        if not parts:
            raise DriverError(f"no metadata for {topic}")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        early = consumer.beginning_offsets(tps)
        late = consumer.end_offsets(tps)
        return {tp.partition: (early[tp], late[tp]) for tp in tps}
    finally:
        consumer.close()


def partition_count(bs, topic, timeout: float = 30) -> int:
    admin = _admin(bs)
    try:
        (desc,) = admin.describe_topics([topic])
        if desc["error_code"]:
            raise DriverError(f"describe_topics {topic}: error {desc['error_code']}")
        return len(desc["partitions"])
    finally:
        admin.close()


def describe_configs(bs, topic, timeout: float = 30) -> dict[str, str]:
    admin = _admin(bs)
    try:
        res = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)],
                                     config_filter="all")
        return _flatten_configs(res, topic)
    finally:
        admin.close()


def _flatten_configs(res, topic) -> dict[str, str]:
    # kafka-python 3: {resource_type: {resource_name: {config_name: {config data}}}}
    by_name = next(iter(res.values()), {}) if res else {}
    entries = by_name.get(topic, {})
    return {k: (v.get("value") if isinstance(v, dict) else v) for k, v in entries.items()}


def create_partitions(bs, topic, total, timeout: float = 30) -> None:
    admin = _admin(bs)
    try:
        admin.create_partitions({topic: NewPartitions(total)}, timeout_ms=int(timeout * 1000))
    finally:
        admin.close()


def delete_topic(bs, topic, timeout: float = 30) -> None:
    admin = _admin(bs)
    try:
        admin.delete_topics([topic], timeout_ms=int(timeout * 1000))
    finally:
        admin.close()


def list_topics(bs, timeout: float = 30) -> set[str]:
    admin = _admin(bs)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()
