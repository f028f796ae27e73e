"""Committed offsets of partitions that no longer exist (a KIP-253 deletion drained and removed
them, or their topic was deleted) are tombstoned by the coordinator when its metadata shows the
removal (Kafka's onPartitionsDeleted), for classic and KIP-848 groups, so a partition re-created
later at the same index (N -> 2N -> N -> 2N) starts without the old offsets — also on a new
coordinator after a failover."""
from __future__ import annotations

import asyncio
import uuid

import kafka.errors as Errors
import pytest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from minibroker.metadata.cache import PartitionInfo, TopicInfo
from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection
from minibroker.protocol.records import GroupMetadataKey, OffsetCommitKey
from tests.cluster_helpers import request_once, set_partition_count, wait_until
from tests.coordinator.test_classic_group import (GROUP, make_broker, lead, loaded,  # noqa: F401
                                                  stable_one)
from tests.coordinator.test_consumer_group import hb
from tests.coordinator.test_consumer_group import log_records as decoded_log


def topic_t(n: int) -> TopicInfo:
    return TopicInfo("t", uuid.UUID(int=1), False, {
        i: PartitionInfo(i, 1, 0, 0, (1,), (1,)) for i in range(n)}, 1, n)


def offsets(b, group: str) -> dict:
    code, topics = b.groups.offsets.fetch_offsets(group, None)
    assert code == 0
    return {(t, p): o for t, parts in topics for p, o, *_ in parts}


def commit(b, group: str, generation: int, member: str, *tpo):
    return b.groups.offsets.commit_offsets(group, generation, member, None, -1,
                                           [(t, p, o, -1, "", -1) for t, p, o in tpo])


async def three_groups(b) -> str:
    """g: a Stable classic group; cg: a KIP-848 group; solo: offsets only (generation -1)."""
    m1 = await stable_one(b)
    await commit(b, GROUP, 1, m1, ("t", 0, 10), ("t", 1, 11), ("u", 0, 5))
    assert (await hb(b, "c1", 0, group="cg")).member_epoch == 1
    await commit(b, "cg", 1, "c1", ("t", 0, 20), ("t", 1, 21))
    await commit(b, "solo", -1, "", ("t", 1, 7))
    assert offsets(b, "solo") == {("t", 1): 7}
    return m1


async def test_offsets_of_a_removed_partition_are_tombstoned_and_not_inherited(broker):
    m1 = await three_groups(broker)
    pos = broker.groups.positions
    assert pos.consumer_group_position(GROUP, 1, m1, [("t", [(1, False, 40)])])[0] == 0
    n = len(decoded_log(broker))

    broker.metadata.put_topic(topic_t(1))               # t-1 drained and removed
    await asyncio.sleep(0)
    assert offsets(broker, GROUP) == {("t", 0): 10, ("u", 0): 5}
    assert offsets(broker, "cg") == {("t", 0): 20}
    assert offsets(broker, "solo") == {} and "solo" not in broker.groups.shards[0].groups
    assert ("t", 1) not in pos.state(broker.groups.shards[0].groups[GROUP]).positions
    assert decoded_log(broker)[n:] == [
        (OffsetCommitKey(group="cg", topic="t", partition=1), None),
        (OffsetCommitKey(group=GROUP, topic="t", partition=1), None),
        (OffsetCommitKey(group="solo", topic="t", partition=1), None),
        (GroupMetadataKey(group="solo"), None)]

    lead(broker, 1)                                     # reload by replay
    await loaded(broker)
    assert offsets(broker, GROUP) == {("t", 0): 10, ("u", 0): 5}
    assert offsets(broker, "cg") == {("t", 0): 20}
    broker.metadata.put_topic(topic_t(2))               # re-created at the same index
    await asyncio.sleep(0)
    assert offsets(broker, GROUP) == {("t", 0): 10, ("u", 0): 5}
    assert broker.groups.offsets.fetch_offsets(GROUP, [("t", [1])]) == \
        (0, [("t", [(1, -1, -1, "", 0)])])


async def test_offsets_of_a_deleted_topic_are_tombstoned(broker):
    await three_groups(broker)
    broker.metadata.remove_topic("u")
    await asyncio.sleep(0)
    assert offsets(broker, GROUP) == {("t", 0): 10, ("t", 1): 11}
    lead(broker, 1)
    await loaded(broker)
    assert offsets(broker, GROUP) == {("t", 0): 10, ("t", 1): 11}


async def test_a_removal_seen_while_the_shard_loads_applies_once_loaded(broker):
    await three_groups(broker)
    lead(broker, 1)
    assert broker.groups.shards[0].loading
    broker.metadata.put_topic(topic_t(1))
    await loaded(broker)
    await asyncio.sleep(0)
    assert offsets(broker, GROUP) == {("t", 0): 10, ("u", 0): 5}
    assert offsets(broker, "cg") == {("t", 0): 20}
    lead(broker, 2)
    await loaded(broker)
    assert offsets(broker, GROUP) == {("t", 0): 10, ("u", 0): 5}


async def test_a_commit_in_flight_when_its_partition_is_removed_is_dropped(broker):
    m1 = await three_groups(broker)
    fut = commit(broker, GROUP, 1, m1, ("t", 1, 12))
    commit(broker, "late", -1, "", ("t", 1, 3))         # a group that has no offsets yet
    broker.metadata.put_topic(topic_t(1))               # before the commits are replayed
    await fut
    await asyncio.sleep(0)
    assert ("t", 1) not in offsets(broker, GROUP) and offsets(broker, "late") == {}
    lead(broker, 1)
    await loaded(broker)
    assert ("t", 1) not in offsets(broker, GROUP) and offsets(broker, "late") == {}


# ---------------------------------------------------------------------------------- cluster
async def find_coordinator(c: Cluster, group: str, not_: int | None = None) -> int:
    for _ in range(400):
        b = next(b for b in c.brokers.values() if b.running)
        r = await request_once(c, b.node_id, FindCoordinatorRequest(key=group, key_type=0), 3,
                               client_id="t")
        if r.error_code == 0 and r.node_id != not_:
            return r.node_id
        await asyncio.sleep(0.05)
    raise AssertionError("no coordinator")


async def fetch(c: Cluster, node: int, group: str) -> dict:
    b = c.brokers[node]
    conn = await KafkaClientConnection.connect(b.host, b.port, client_id="f")
    try:
        for _ in range(400):
            r = await conn.request(OffsetFetchRequest(group_id=group, topics=None), 7)
            if r.error_code != Errors.CoordinatorLoadInProgressError.errno:
                break
            await asyncio.sleep(0.05)
    finally:
        conn.close()
    assert r.error_code == 0
    return {(t.name, p.partition_index): p.committed_offset for t in r.topics
            for p in t.partitions}


@pytest.mark.timeout(60)
async def test_n_2n_n_2n_offsets_do_not_survive_removal_nor_a_coordinator_failover():
    async with Cluster(brokers=3, partition_deletion_check_interval_ms=50) as c:
        await c.create_topic("t", 2, 3)
        await set_partition_count(c, "t", 4)              # N -> 2N
        coord = await find_coordinator(c, "grp")
        codes = await commit(c.brokers[coord], "grp", -1, "", ("t", 0, 5), ("t", 3, 7))
        assert codes == {("t", 0): 0, ("t", 3): 0}
        await set_partition_count(c, "t", 2)              # 2N -> N: empty, drained, removed
        await wait_until(lambda: ("t", 3) not in offsets(c.brokers[coord], "grp"),
                         what="offsets of t-3 dropped")

        await c.stop_broker(coord)
        new = await find_coordinator(c, "grp", not_=coord)
        assert await fetch(c, new, "grp") == {("t", 0): 5}
        await c.start_broker(coord)                     # RF 3 again for the expansion
        await set_partition_count(c, "t", 4)              # N -> 2N: t-3 again, no offset
        assert await fetch(c, await find_coordinator(c, "grp"), "grp") == {("t", 0): 5}
