"""Group-managed consumers: JoinGroup/SyncGroup with our assignors, heartbeats, commits."""
from __future__ import annotations

import asyncio

import pytest

from minibroker.client import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.timeout(30)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, list]] = []

    def on_partitions_revoked(self, tps):
        self.events.append(("revoked", list(tps)))

    async def on_partitions_assigned(self, tps):
        self.events.append(("assigned", list(tps)))


async def test_three_consumers_six_partitions_two_each(cluster):
    await cluster.create_topic("g6", partitions=6, replication_factor=3)
    async with Producer(cluster.bootstrap) as producer:
        await asyncio.gather(*[producer.send("g6", b"%d" % i, key=b"k%d" % i) for i in range(120)])
    listeners = [Recorder() for _ in range(3)]
    consumers = [Consumer(cluster.bootstrap, group_id="grp", auto_offset_reset="earliest",
                          heartbeat_interval_ms=100, session_timeout_ms=6000,
                          fetch_max_wait_ms=100, enable_auto_commit=False) for _ in range(3)]
    try:
        for c, lis in zip(consumers, listeners):
            c.subscribe(["g6"], listener=lis)
        loop = asyncio.get_running_loop()
        end = loop.time() + 8
        got: list = []
        while loop.time() < end:
            batches = await asyncio.gather(*[c.poll(0.1) for c in consumers])
            for b in batches:
                got += b
            sizes = [len(c.assignment()) for c in consumers]
            if sizes == [2, 2, 2] and len(got) >= 120 and \
                    len({c.generation_id for c in consumers}) == 1:
                break
        assert [len(c.assignment()) for c in consumers] == [2, 2, 2]
        union = set().union(*(c.assignment() for c in consumers))
        assert union == {TopicPartition("g6", p) for p in range(6)}
        assert len({c.generation_id for c in consumers}) == 1
        # After the final rebalance every record is still delivered (from the start: no commits).
        assert len({(r.partition, r.offset) for r in got}) == 120
        for c, lis in zip(consumers, listeners):
            assert lis.events[-1] == ("assigned", sorted(c.assignment()))
        # Commit and read back through a fresh member of the same group.
        c0 = consumers[0]
        tp = sorted(c0.assignment())[0]
        await c0.commit({tp: 3})
        assert await c0.committed(tp) == 3
    finally:
        await asyncio.gather(*[c.close() for c in consumers])


async def test_group_commit_resume_and_leave(cluster):
    await cluster.create_topic("gr", partitions=2, replication_factor=1)
    async with Producer(cluster.bootstrap) as producer:
        await asyncio.gather(*[producer.send("gr", b"%d" % i, partition=i % 2) for i in range(20)])
    c1 = Consumer(cluster.bootstrap, group_id="resume", auto_offset_reset="earliest",
                  heartbeat_interval_ms=100, fetch_max_wait_ms=50, auto_commit_interval_ms=100)
    c1.subscribe(["gr"])
    got = []
    loop = asyncio.get_running_loop()
    end = loop.time() + 6
    while len(got) < 20 and loop.time() < end:
        got += await c1.poll(0.2)
    assert len(got) == 20
    await c1.close()                            # commits positions, leaves the group
    async with Producer(cluster.bootstrap) as producer:
        await asyncio.gather(*[producer.send("gr", b"new%d" % i, partition=i % 2) for i in range(4)])
    c2 = Consumer(cluster.bootstrap, group_id="resume", auto_offset_reset="earliest",
                  heartbeat_interval_ms=100, fetch_max_wait_ms=50)
    c2.subscribe(["gr"])
    got2 = []
    end = loop.time() + 6
    while len(got2) < 4 and loop.time() < end:
        got2 += await c2.poll(0.2)
    await c2.close()
    assert sorted(r.value for r in got2) == [b"new0", b"new1", b"new2", b"new3"]
