"""Followers fetch in KIP-227 fetch sessions, as Kafka's do: once a session is open, a follower's
request names only the partitions whose fetch state moved (not every partition it follows from
that leader), and a follower whose session the leader lost opens a new one and goes on. The
leader skips the partitions of a follower's session that have nothing to say (quiet ones), and
they still wake its long poll and keep it in the ISR, as long as it fetches."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import KafkaStorageError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import FetchResponse

from cluster_helpers import batch, connect, produce_request, until_partition
from minibroker.broker import fetch_path
from minibroker.broker.partition import Partition
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
            self.requests.append((ctx.node_id, req.replica_id, req.session_id,
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


LAG_MS = 2000


@pytest.fixture
async def c():
    cluster = Cluster(brokers=3, replica_lag_time_max_ms=LAG_MS)
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


@pytest.fixture
def rare_full_visits(monkeypatch):
    """A follower session's visit of all its partitions once a minute instead of once a second,
    so that what these tests check is not done by those visits (named before the cluster)."""
    monkeypatch.setattr(fetch_path, "QUIET_REFRESH_MS", 60_000)


class Visits:
    """Partition.update_follower_fetch calls (a follower fetch's visit of a partition), as
    (broker, partition)."""

    def __init__(self, monkeypatch) -> None:
        self.seen: list[tuple[int, int]] = []
        orig = Partition.update_follower_fetch

        def counted(p, replica_id, fetch_offset, now_ms):
            self.seen.append((p.node_id, p.partition))
            return orig(p, replica_id, fetch_offset, now_ms)
        monkeypatch.setattr(Partition, "update_follower_fetch", counted)


def quiet_in_every_session(c: Cluster, leader: int, partition: int) -> bool:
    sessions = c.brokers[leader].fetch_sessions._sessions.values()
    return len(sessions) == 2 and all(s.partitions[(T, partition)].quiet >= 0 for s in sessions)


async def test_quiet_partitions_are_skipped_and_an_append_to_one_wakes_the_followers(
        rare_full_visits, c, monkeypatch):
    await asyncio.sleep(1.2)            # idle fetches: every partition found quiet
    loop = asyncio.get_running_loop()
    leader = await c.leader_of(T, 3)
    assert quiet_in_every_session(c, leader, 3)
    visits = Visits(monkeypatch)
    conn = await connect(c, leader)
    start = loop.time()
    await conn.request(produce_request(T, 3, batch([b"q"], c.clock.now_ms())), 9)
    # Answered at both followers' next fetches, not when their long polls end (500 ms): the
    # append woke fetches that had skipped partition 3, and they visited it.
    assert loop.time() - start < 0.1
    await replicated(c, 3, 2)
    conn.close()
    # Only the written partition was visited by the followers' fetches to its leader.
    assert {part for node, part in visits.seen if node == leader} == {3}, visits.seen


async def test_followers_stay_in_the_isr_while_their_partitions_are_quiet(rare_full_visits, c):
    await asyncio.sleep(3 * LAG_MS / 1000)
    for p in range(PARTITIONS):
        assert quiet_in_every_session(c, await c.leader_of(T, p), p)
        st = await c.partition_state(T, p)
        assert sorted(st["isr"]) == [1, 2, 3], (p, st)
    assert sum(b.replica_manager.stats.isr_shrinks for b in c.brokers.values()) == 0


class RefuseFetches:
    """A follower's Fetch requests answered KAFKA_STORAGE_ERROR: it keeps running, fetching
    nothing."""

    def __init__(self, c: Cluster, follower: int) -> None:
        self.follower = follower
        c.faults.control(ApiKey.Fetch, self)

    def __call__(self, req, ctx):
        if req.replica_id != self.follower:
            return None
        return FetchResponse(throttle_time_ms=0, error_code=KafkaStorageError.errno, session_id=0,
                             responses=[])


async def test_a_follower_that_stops_fetching_leaves_the_isr_though_its_partitions_were_quiet(
        rare_full_visits, c):
    await asyncio.sleep(1.2)
    leader = await c.leader_of(T, 0)
    assert quiet_in_every_session(c, leader, 0)
    follower = min({1, 2, 3} - {leader})
    RefuseFetches(c, follower)
    await asyncio.sleep(3 * LAG_MS / 1000)
    st = await c.partition_state(T, 0)
    assert sorted(st["isr"]) == sorted({1, 2, 3} - {follower}), st
