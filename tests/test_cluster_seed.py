"""A seeded Cluster repeats: the same seed gives the same cluster id, ids and timestamps; an
unseeded one gets a random cluster id and the real wall clock. The clock can be injected."""
from __future__ import annotations

import time

from kafka.protocol.producer import ProduceRequest

from minibroker.clock import SEEDED_WALL_BASE_MS, Clock
from minibroker.cluster import Cluster
from tests.cluster_helpers import batch, connect


async def _append_time_of_first_write(seed: int) -> tuple[str, int, list]:
    """Start a seeded cluster, write one batch to a LogAppendTime topic before any time passes
    in the cluster's clock, and return (cluster id, its log append time, topic ids)."""
    c = Cluster(brokers=1, seed=seed)
    assert c.clock.wall_base_ms == SEEDED_WALL_BASE_MS
    async with c:
        await c.create_topic("t", 1, 1, {"message.timestamp.type": "LogAppendTime"})
        conn = await connect(c, 1)
        T, P = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
        resp = await conn.request(ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000,
                                                 topic_data=[T(name="t", partition_data=[
                                                     P(index=0, records=batch([b"x"], 0))])]), 9)
        conn.close()
        append_ms = resp.responses[0].partition_responses[0].log_append_time_ms
        topic_ids = [t.topic_id for t in (await c.active_controller()).image.topics.values()]
        return c.cluster_id, append_ms, topic_ids


async def test_the_same_seed_gives_the_same_cluster_id_ids_and_timestamps():
    first = await _append_time_of_first_write(11)
    again = await _append_time_of_first_write(11)
    other = await _append_time_of_first_write(12)
    assert first[0] == again[0] and first[2] == again[2]
    assert other[0] != first[0] and other[2] != first[2]
    # The wall clock starts at the same instant for a seed: an append time is that base plus
    # the (virtual) time the run took, not today's date.
    assert first[1] == again[1]
    for _, append_ms, _ in (first, again, other):
        assert SEEDED_WALL_BASE_MS <= append_ms < SEEDED_WALL_BASE_MS + 60_000


def test_unseeded_clusters_get_random_ids_and_the_real_clock():
    a, b = Cluster(brokers=1), Cluster(brokers=1)
    assert a.cluster_id != b.cluster_id and len(a.cluster_id) == 22
    assert abs(a.clock.wall_base_ms - time.time() * 1000) < 60_000


def test_the_clock_and_its_base_can_be_given():
    assert Cluster(brokers=1, seed=3, wall_clock_base_ms=5_000).clock.wall_base_ms == 5_000
    clock = Clock(wall_base_ms=42)
    c = Cluster(brokers=2, clock=clock)
    assert c.clock is clock and all(b.clock is clock for b in c.brokers.values())
    assert Cluster(brokers=1, cluster_id="fixed").cluster_id == "fixed"


async def _first_topic_id(**kw) -> object:
    async with Cluster(brokers=1, **kw) as c:
        await c.create_topic("t", 1, 1)
        return next(iter((await c.active_controller()).image.topics.values())).topic_id


async def test_unseeded_clusters_draw_different_topic_ids():
    """Topic ids repeat only under a seed: two unseeded clusters name their first topic apart,
    so a client that confuses a recreated topic with the old one is caught."""
    assert await _first_topic_id() != await _first_topic_id()
    assert await _first_topic_id(seed=5) == await _first_topic_id(seed=5)
