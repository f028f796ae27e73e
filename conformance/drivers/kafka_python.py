"""kafka-python 3.0.12, called in-process."""
from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

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
        admin.create_partitions({topic: total}, timeout_ms=int(timeout * 1000))
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


# ------------------------------------------------------------------ consumer groups
from ._group import HEARTBEAT_INTERVAL_MS, POLL_S, SESSION_TIMEOUT_MS, GroupMemberBase  # noqa: E402


class GroupMember(GroupMemberBase):
    """A subscribed KafkaConsumer (range/roundrobin, eager), committing each batch synchronously."""

    def _loop(self) -> None:
        from kafka import ConsumerRebalanceListener, OffsetAndMetadata

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                member.revoked(tp.partition for tp in revoked)

            def on_partitions_assigned(self, assigned):
                member.assigned(tp.partition for tp in assigned)

        consumer = KafkaConsumer(
            bootstrap_servers=self.bs, client_id=f"conformance-kafka-python-{self.name}",
            group_id=self.group, enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            fetch_max_wait_ms=200, retry_backoff_ms=100, **_COMMON)
        try:
            consumer.subscribe([self.topic], listener=Listener())
            # Topic metadata before the first join, as applications that size their work by
            # partitions_for_topic have. Without it the first leader assigns from empty metadata
            # and rejoins when the partitions arrive; in kafka-python 3.0.12 such a self-started
            # rejoin can strand the member: once the leader's assignment makes need_rejoin()
            # False, a poll() whose timeout ends before the SyncGroup response never collects
            # it, and the member stops heartbeating until the group evicts it.
            consumer.partitions_for_topic(self.topic)
            while not self.stopping.is_set():
                batch = consumer.poll(timeout_ms=int(POLL_S * 1000))
                seen = []
                for tp in sorted(batch, key=lambda t: t.partition):
                    for m in batch[tp]:
                        self.got(m.partition, m.offset, m.key, m.value)
                        seen.append((m.partition, m.offset))
                if seen and self.commit_enabled:
                    offsets = self.next_offsets(seen)
                    try:
                        consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
                                         for p, o in offsets.items()})
                    except Exception as e:  # noqa: BLE001 — at-least-once: redelivered later
                        self.commit_failed(e)
                    else:
                        self.committed(offsets)
        finally:
            consumer.close(autocommit=False)


def committed_offsets(bs, group, topic, timeout: float = 30) -> dict[int, int]:
    """The group's committed offsets for ``topic`` (OffsetFetch through the admin client)."""
    admin = _admin(bs)
    try:
        res = admin.list_group_offsets({group: None})
        offsets = res.get(group, res) if isinstance(res, dict) else res
        return {tp.partition: om.offset for tp, om in offsets.items()
                if tp.topic == topic and om.offset >= 0}
    finally:
        admin.close()


def describe_group(bs, group, timeout: float = 30) -> dict:
    """DescribeGroups, normalised: {"state", "protocol", "members": {client_id: [partitions]}}."""
    admin = _admin(bs)
    try:
        g = admin.describe_groups([group])[group]
    finally:
        admin.close()
    members = {}
    for m in g["members"]:
        parts = []
        for a in (m.get("member_assignment") or {}).get("assigned_partitions", []):
            parts.extend(a["partitions"])
        members[m["client_id"]] = sorted(parts)
    return {"state": g["group_state"], "protocol": g["protocol_data"], "members": members}


def find_coordinator(bs, group, timeout: float = 30) -> int:
    """FindCoordinator (key type GROUP) -> the coordinator's node id."""
    admin = _admin(bs)
    try:
        # no public wrapper in kafka-python 3.0; the admin client runs its coroutine like this
        return admin._manager.run(admin._find_coordinator_id, group)  # noqa: SLF001
    finally:
        admin.close()


def list_groups(bs, timeout: float = 30) -> dict[str, tuple[str, str]]:
    """ListGroups on every broker: {group: (state, protocol type)}."""
    admin = _admin(bs)
    try:
        return {g["group_id"]: (g.get("group_state"), g["protocol_type"])
                for g in admin.list_groups()}
    finally:
        admin.close()


def delete_groups(bs, groups, timeout: float = 30) -> dict[str, str]:
    """DeleteGroups: {group: "OK" or the error's name}."""
    admin = _admin(bs)
    try:
        return dict(admin.delete_groups(list(groups)))
    finally:
        admin.close()
