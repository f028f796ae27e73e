"""KIP-253 in the reference consumer: INVALID_PARTITION_METADATA with an older count (the topic
grew under it: refresh, rejoin, consume the new partitions) and a newer one (retried until the
leader agrees); the expansion barrier delivers a key's parent records before its new-partition
records and calls on_partition_key_assigned; assignment in two lists."""
from __future__ import annotations

import asyncio

import pytest
from kafka.protocol.api_key import ApiKey

from minibroker.broker.handlers.k01_fetch import _error, _response
from minibroker.client import (Admin, Consumer, PartitionKeyRebalanceListener, Producer,
                               TopicPartition)
from minibroker.client.group_protocol import range_assign, roundrobin_assign, split_assign
from minibroker.partitioning import partition_for_key
from minibroker.protocol.errors import INVALID_PARTITION_METADATA

pytestmark = pytest.mark.timeout(60)
KEYS = [b"key-%d" % i for i in range(40)]


class KeyListener(PartitionKeyRebalanceListener):
    def __init__(self) -> None:
        self.assigned: list = []
        self.maybe_revoked: list = []

    def on_partition_key_assigned(self, tps):
        self.assigned.append(sorted(tps))

    def on_partition_key_maybe_revoked(self, tps):
        self.maybe_revoked.append(sorted(tps))


def group_consumer(cluster, group: str, **kw) -> Consumer:
    return Consumer(cluster.bootstrap, group_id=group, auto_offset_reset="earliest",
                    heartbeat_interval_ms=100, fetch_max_wait_ms=50, metadata_max_age_ms=60000,
                    **kw)


async def poll_until(consumers, pred, seconds: float = 20.0) -> list:
    got: list = []
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while loop.time() < end and not pred(got):
        for c in consumers:
            got += await c.poll(0.05)
    return got


def test_split_assign_deals_undeleted_and_marked_separately():
    subs = {"a": ["t"], "b": ["t"]}
    # 0..3 undeleted, 4 and 5 marked: each member gets two undeleted and one marked partition
    # (one list of six would give "a" 0,1,2 — all of the range's undeleted head).
    assert split_assign(range_assign, subs, {"t": ([0, 1, 2, 3], [4, 5])}) == \
        {"a": {"t": [0, 1, 4]}, "b": {"t": [2, 3, 5]}}
    assert split_assign(roundrobin_assign, subs, {"t": ([0, 1], [])}) == \
        {"a": {"t": [0]}, "b": {"t": [1]}}


async def test_older_count_rejoins_and_consumes_new_partitions(cluster):
    await cluster.create_topic("older", 2, 3)
    c = group_consumer(cluster, "g-older")
    c.subscribe(["older"])
    try:
        async with Producer(cluster.bootstrap) as p, Admin(cluster.bootstrap) as admin:
            await asyncio.gather(*[p.send("older", b"a", key=k) for k in KEYS])
            got = await poll_until([c], lambda g: len(g) >= 40)
            assert len(got) == 40 and c.assignment() == {TopicPartition("older", 0),
                                                         TopicPartition("older", 1)}
            generation = c.generation_id
            await admin.create_partitions({"older": 4})
            # The consumer's fetches now carry an old count: refused, it refreshes and rejoins.
            got = await poll_until([c], lambda g: len(c.assignment()) == 4, 10)
            assert len(c.assignment()) == 4 and c.generation_id > generation
            await asyncio.gather(*[p.send("older", b"b", key=k) for k in KEYS])
            got = await poll_until([c], lambda g: len(g) >= 40)
        assert sorted(r.key for r in got) == sorted(KEYS)
        assert {r.partition for r in got} == {partition_for_key(k, 2, 4) for k in KEYS}
    finally:
        await c.close()


async def test_newer_count_than_the_leader_is_retried(cluster):
    await cluster.create_topic("newer-c", 1, 1)
    refused = []

    def control(req, ctx):
        if req.replica_id < 0 and len(refused) < 3:
            refused.append(1)
            return _response(ctx, 0, [("newer-c", [_error(0, INVALID_PARTITION_METADATA)])])
        return None

    async with Producer(cluster.bootstrap) as p:
        await asyncio.gather(*[p.send("newer-c", b"%d" % i, key=b"k") for i in range(10)])
    cluster.faults.control(ApiKey.Fetch, control)
    c = group_consumer(cluster, "g-newer")
    c.subscribe(["newer-c"])
    try:
        got = await poll_until([c], lambda g: len(g) >= 10)
        assert [int(r.value) for r in got] == list(range(10)) and len(refused) == 3
    finally:
        await c.close()


@pytest.mark.parametrize("barrier", [True, False])
async def test_expansion_barrier_delivers_the_parent_first(cluster, barrier):
    topic = f"barrier-{barrier}"
    await cluster.create_topic(topic, 1, 1)
    moving = [k for k in KEYS if partition_for_key(k, 1, 2) == 1][:5]
    async with Producer(cluster.bootstrap) as p, Admin(cluster.bootstrap) as admin:
        for i in range(30):
            await asyncio.gather(*[p.send(topic, b"%d" % i, key=k) for k in moving])
        await admin.create_partitions({topic: 2})
        for _ in range(100):
            await p.metadata.refresh([topic])
            if p.metadata.topic(topic).undeleted_partition_count == 2:
                break
            await asyncio.sleep(0.02)
        for i in range(30, 40):
            mds = await asyncio.gather(*[p.send(topic, b"%d" % i, key=k) for k in moving])
            assert {m.partition for m in mds} == {1}
    listener = KeyListener()
    c = group_consumer(cluster, f"g-{topic}", max_poll_records=5, ordering_barrier=barrier)
    c.subscribe([topic], partition_key_listener=listener)
    try:
        got = await poll_until([c], lambda g: len(g) >= 200)
    finally:
        await c.close()
    first_child = next(i for i, r in enumerate(got) if r.partition == 1)
    parent_records = sum(1 for r in got if r.partition == 0)
    if barrier:
        assert parent_records == 150 and first_child == 150
        assert listener.assigned == [[TopicPartition(topic, 1)]]
    else:
        assert first_child < 150                        # the child's records overtake the parent's
