"""minibroker.client (the reference asyncio client), called in-process through asyncio.run."""
from __future__ import annotations

import asyncio

from minibroker.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from minibroker.client.admin import TOPIC

from . import ALL_CODECS, DriverError, run_bounded

NAME = "minibroker_client"
CODECS = ALL_CODECS
MISSING_CODECS: dict[str, str] = {}
HAS_ADMIN = True
HAS_IDEMPOTENCE = True


async def _admin(bs, fn):
    async with Admin(bs, client_id="conformance-minibroker-admin",
                     request_timeout_ms=15000) as admin:
        return await fn(admin)


def create_topic(bs, name, partitions, rf, configs=None, timeout: float = 30) -> None:
    run_bounded(_admin(bs, lambda a: a.create_topics([NewTopic(name, partitions, rf,
                                                               configs or {})])), timeout, NAME)


def produce(bs, topic, records, codec, acks="all", idempotent=False, timeout: float = 60, **extra):
    async def go():
        producer = Producer(bs, client_id="conformance-minibroker",
                            acks=-1 if acks == "all" else int(acks),
                            compression=None if codec == "none" else codec,
                            enable_idempotence=idempotent, linger_ms=5,
                            delivery_timeout_ms=int(timeout * 1000), **extra)
        await producer.start()
        try:
            mds = await asyncio.gather(*[producer.send(topic, v, key=k) for k, v in records])
            return [(md.partition, md.offset) for md in mds]
        finally:
            await producer.stop()
    return run_bounded(go(), timeout, NAME)


def consume_assigned(bs, topic, partitions, expected_count, timeout: float = 30):
    async def go():
        consumer = Consumer(bs, client_id="conformance-minibroker", auto_offset_reset="earliest",
                            enable_auto_commit=False, fetch_max_wait_ms=200)
        consumer.assign([TopicPartition(topic, p) for p in partitions])
        out = []
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout - 1
        try:
            while len(out) < expected_count and loop.time() < end:
                for r in await consumer.poll(0.2):
                    out.append((r.partition, r.offset, r.key, r.value))
        finally:
            await consumer.close()
        return out
    return run_bounded(go(), timeout, NAME)


def list_offsets(bs, topic, timeout: float = 30):
    async def go(admin):
        md = (await admin.describe_topics([topic]))[topic]
        if md is None or not md.partitions:
            raise DriverError(f"no metadata for {topic}")
        tps = [TopicPartition(topic, p) for p in sorted(md.partitions)]
        early = await admin.list_offsets({tp: "earliest" for tp in tps})
        late = await admin.list_offsets({tp: "latest" for tp in tps})
        return {tp.partition: (early[tp][0], late[tp][0]) for tp in tps}
    return run_bounded(_admin(bs, go), timeout, NAME)


def partition_count(bs, topic, timeout: float = 30) -> int:
    async def go(admin):
        topics = await admin.list_topics()
        if topic not in topics:
            raise DriverError(f"no topic {topic}")
        return topics[topic]
    return run_bounded(_admin(bs, go), timeout, NAME)


def describe_configs(bs, topic, timeout: float = 30) -> dict[str, str]:
    async def go(admin):
        return (await admin.describe_configs(topics=[topic]))[(TOPIC, topic)]
    return run_bounded(_admin(bs, go), timeout, NAME)


def create_partitions(bs, topic, total, timeout: float = 30) -> None:
    run_bounded(_admin(bs, lambda a: a.create_partitions({topic: total})), timeout, NAME)


def delete_topic(bs, topic, timeout: float = 30) -> None:
    run_bounded(_admin(bs, lambda a: a.delete_topics([topic])), timeout, NAME)


def list_topics(bs, timeout: float = 30) -> set[str]:
    return set(run_bounded(_admin(bs, lambda a: a.list_topics()), timeout, NAME))


# ------------------------------------------------------------------ consumer groups
from ._group import HEARTBEAT_INTERVAL_MS, POLL_S, SESSION_TIMEOUT_MS, GroupMemberBase  # noqa: E402


class GroupMember(GroupMemberBase):
    """A subscribed minibroker.client.Consumer on its own event loop (in the member's thread),
    committing each batch with ``await commit(offsets)``; close() sends LeaveGroup."""

    def _loop(self) -> None:
        asyncio.run(self._aloop())

    async def _aloop(self) -> None:
        consumer = Consumer(self.bs, group_id=self.group,
                            client_id=f"conformance-minibroker-{self.name}",
                            auto_offset_reset="earliest", enable_auto_commit=False,
                            session_timeout_ms=SESSION_TIMEOUT_MS,
                            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                            rebalance_timeout_ms=20000, fetch_max_wait_ms=200,
                            request_timeout_ms=15000)
        try:
            consumer.subscribe([self.topic], listener=self.listener())
            while not self.stopping.is_set():
                seen = []
                for r in await consumer.poll(POLL_S):
                    self.got(r.partition, r.offset, r.key, r.value)
                    seen.append((r.partition, r.offset))
                await self.commit_batch(seen, lambda offsets: consumer.commit(
                    {TopicPartition(self.topic, p): o for p, o in offsets.items()}))
        finally:
            await consumer.close(timeout=10)
