"""Followers fetch in KIP-227 fetch sessions, as Kafka's do: once a session is open, a follower's
request names only the partitions whose fetch state moved (not every partition it follows from
that leader), and a follower whose session the leader lost opens a new one and goes on."""
from __future__ import annotations

import pytest
from kafka.protocol.api_key import ApiKey

from cluster_helpers import batch, connect, produce_request, until_partition
from minibroker.cluster import Cluster

T = "t"
PARTITIONS = 6


class Recorder:
    """Every follower Fetch request each broker receives, through the fault hook (answered as
    usual): (leader, follower, session id, session epoch, named (topic, partition)s)."""

    def __init__(self, c: Cluster) -> None:
        self.requests: list[tuple] = []
        c.faults.control(ApiKey.Fetch, self)

    def __call__(self, req, ctx):
        if req.replica_id >= 0:
            self.requests.append((ctx.broker.node_id, req.replica_id, req.session_id,
                                  req.session_epoch, {(t.topic, p.partition) for t in req.topics
                                                      for p in t.partitions}))
        return None


async def replicated(c: Cluster, partition: int, end: int) -> None:
    async def done():
        st = await c.partition_state(T, partition)
        ok = len(st["isr"]) == 3 and all(
            (st["logs"][r]["log_end_offset"], st["logs"][r]["high_watermark"]) == (end, end)
            for r in st["isr"])
        return True if ok else None
    await until_partition(c, T, partition, done)


@pytest.fixture
async def c():
    cluster = Cluster(brokers=3)
    await cluster.start()
    try:
        await cluster.create_topic(T, PARTITIONS, 3)
        for p in range(PARTITIONS):           # every partition written once: sessions are open
            conn = await connect(cluster, await cluster.leader_of(T, p))
            await conn.request(produce_request(T, p, batch([b"w"], cluster.clock.now_ms())), 9)
            conn.close()
            await replicated(cluster, p, 1)
        yield cluster
    finally:
        await cluster.stop()


async def test_a_write_to_one_partition_is_fetched_by_naming_that_partition_only(c):
    rec = Recorder(c)
    leader = await c.leader_of(T, 3)
    conn = await connect(c, leader)
    await conn.request(produce_request(T, 3, batch([b"x"], c.clock.now_ms())), 9)
    await replicated(c, 3, 2)
    conn.close()
    assert rec.requests
    assert all(epoch >= 1 and sid != 0 for _, _, sid, epoch, _ in rec.requests), rec.requests
    named = set().union(*(parts for *_, parts in rec.requests))
    assert named == {(T, 3)}, rec.requests
    # Both followers of partition 3 named it to its leader (their fetch offset moved).
    assert {f for lead, f, *_, parts in rec.requests if (T, 3) in parts and lead == leader} == \
        {1, 2, 3} - {leader}


async def test_a_follower_whose_session_the_leader_lost_opens_a_new_one(c):
    leader = await c.leader_of(T, 0)
    rec = Recorder(c)
    c.brokers[leader].fetch_sessions._sessions.clear()      # evicted, or the leader restarted
    conn = await connect(c, leader)
    await conn.request(produce_request(T, 0, batch([b"y"], c.clock.now_ms())), 9)
    await replicated(c, 0, 2)
    conn.close()
    to_leader = [(f, sid, epoch) for lead, f, sid, epoch, _ in rec.requests if lead == leader]
    for f in {1, 2, 3} - {leader}:
        mine = [(sid, epoch) for g, sid, epoch in to_leader if g == f]
        # The stale session's request (refused), then a full one opening a new session.
        assert mine[0][0] != 0 and mine[0][1] >= 1, mine
        assert (0, 0) in mine, mine
