"""aiokafka 0.14, called in-process through asyncio.run."""
from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from . import ALL_CODECS, DriverError, run_bounded

NAME = "aiokafka"
CODECS = ALL_CODECS
MISSING_CODECS: dict[str, str] = {}
HAS_ADMIN = True
HAS_IDEMPOTENCE = True


async def _with_admin(bs, fn):
    admin = AIOKafkaAdminClient(bootstrap_servers=bs, client_id="conformance-aiokafka-admin",
                                request_timeout_ms=15000)
    await admin.start()
    try:
        return await fn(admin)
    finally:
        await admin.close()


def _check(resp, field: str) -> None:
    """Raise on a non-zero error code in a CreateTopics/DeleteTopics/CreatePartitions response."""
    for item in getattr(resp, field):
        code = item[1]
        if code:
            raise DriverError(f"{type(resp).__name__}: {item}")


def create_topic(bs, name, partitions, rf, configs=None, timeout: float = 30) -> None:
    async def go(admin):
        resp = await admin.create_topics(
            [NewTopic(name, partitions, rf, topic_configs=configs or {})],
            timeout_ms=int(timeout * 1000))
        _check(resp, "topic_errors" if hasattr(resp, "topic_errors") else "topics")
    run_bounded(_with_admin(bs, go), timeout, NAME)


def produce(bs, topic, records, codec, acks="all", idempotent=False, timeout: float = 60):
    async def go():
        producer = AIOKafkaProducer(
            bootstrap_servers=bs, client_id="conformance-aiokafka",
            acks="all" if acks == "all" else int(acks),
            compression_type=None if codec == "none" else codec,
            enable_idempotence=idempotent, linger_ms=5, request_timeout_ms=15000)
        await producer.start()
        try:
            futs = [await producer.send(topic, key=k, value=v) for k, v in records]
            mds = await asyncio.gather(*futs)
            return [(md.partition, md.offset) for md in mds]
        finally:
            await producer.stop()
    return run_bounded(go(), timeout, NAME)


def _consumer(bs):
    return AIOKafkaConsumer(bootstrap_servers=bs, client_id="conformance-aiokafka", group_id=None,
                            enable_auto_commit=False, auto_offset_reset="earliest",
                            fetch_max_wait_ms=200, request_timeout_ms=15000)


def consume_assigned(bs, topic, partitions, expected_count, timeout: float = 30):
    async def go():
        consumer = _consumer(bs)
        await consumer.start()
        out = []
        try:
            tps = [TopicPartition(topic, p) for p in partitions]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout - 1
            while len(out) < expected_count and loop.time() < deadline:
                batch = await consumer.getmany(timeout_ms=200)
                for tp in sorted(batch, key=lambda t: t.partition):
                    out.extend((m.partition, m.offset, m.key, m.value) for m in batch[tp])
            return out
        finally:
            await consumer.stop()
    return run_bounded(go(), timeout + 10, NAME)


def list_offsets(bs, topic, timeout: float = 30):
    async def go():
        consumer = _consumer(bs)
        await consumer.start()
        try:
            parts = consumer.partitions_for_topic(topic)
            for _ in range(50):
                if parts:
                    break
                await consumer._client.force_metadata_update()  # noqa: SLF001 (no public way)
                parts = consumer.partitions_for_topic(topic)
                await asyncio.sleep(0.1)
            if not parts:
                raise DriverError(f"no metadata for {topic}")
            tps = [TopicPartition(topic, p) for p in sorted(parts)]
            early = await consumer.beginning_offsets(tps)
            late = await consumer.end_offsets(tps)
            return {tp.partition: (early[tp], late[tp]) for tp in tps}
        finally:
            await consumer.stop()
    return run_bounded(go(), timeout, NAME)


def partition_count(bs, topic, timeout: float = 30) -> int:
    async def go(admin):
        (desc,) = await admin.describe_topics([topic])
        if desc["error_code"]:
            raise DriverError(f"describe_topics {topic}: error {desc['error_code']}")
        return len(desc["partitions"])
    return run_bounded(_with_admin(bs, go), timeout, NAME)


def describe_configs(bs, topic, timeout: float = 30) -> dict[str, str]:
    async def go(admin):
        resps = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        out = {}
        for resp in resps:
            for res in resp.resources:
                # (error_code, error_message, resource_type, resource_name, config_entries)
                if res[0]:
                    raise DriverError(f"describe_configs {topic}: {res[:2]}")
                if res[3] == topic:
                    out.update({e[0]: e[1] for e in res[4]})
        return out
    return run_bounded(_with_admin(bs, go), timeout, NAME)


def create_partitions(bs, topic, total, timeout: float = 30) -> None:
    async def go(admin):
        resp = await admin.create_partitions({topic: NewPartitions(total)},
                                             timeout_ms=int(timeout * 1000))
        _check(resp, "topic_errors" if hasattr(resp, "topic_errors") else "results")
    run_bounded(_with_admin(bs, go), timeout, NAME)


def delete_topic(bs, topic, timeout: float = 30) -> None:
    async def go(admin):
        resp = await admin.delete_topics([topic], timeout_ms=int(timeout * 1000))
        _check(resp, "topic_error_codes" if hasattr(resp, "topic_error_codes") else "responses")
    run_bounded(_with_admin(bs, go), timeout, NAME)


def list_topics(bs, timeout: float = 30) -> set[str]:
    async def go(admin):
        return set(await admin.list_topics())
    return run_bounded(_with_admin(bs, go), timeout, NAME)


# ------------------------------------------------------------------ consumer groups
from ._group import HEARTBEAT_INTERVAL_MS, POLL_S, SESSION_TIMEOUT_MS, GroupMemberBase  # noqa: E402


class GroupMember(GroupMemberBase):
    """A subscribed AIOKafkaConsumer on its own event loop (in the member's thread), committing
    each batch with ``await commit(offsets)``."""

    def _loop(self) -> None:
        asyncio.run(self._aloop())

    async def _aloop(self) -> None:
        from aiokafka import ConsumerRebalanceListener

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bs, client_id=f"conformance-aiokafka-{self.name}",
            group_id=self.group, enable_auto_commit=False, auto_offset_reset="earliest",
            session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            fetch_max_wait_ms=200, retry_backoff_ms=100, request_timeout_ms=15000)
        await consumer.start()
        try:
            consumer.subscribe([self.topic], listener=self.listener(ConsumerRebalanceListener))
            while not self.stopping.is_set():
                batch = await consumer.getmany(timeout_ms=int(POLL_S * 1000))
                await self.commit_batch(self.got_batch(batch), lambda offsets: consumer.commit(
                    {TopicPartition(self.topic, p): o for p, o in offsets.items()}))
        finally:
            await asyncio.wait_for(consumer.stop(), 15)
