"""KIP-253 on the broker: stale undeleted partition counts in Produce and Fetch get
INVALID_PARTITION_METADATA on every affected partition; legacy requests (no count) pass;
writes into partitions marked for deletion are refused; PartitionLeaderEpochsForPartitions
answers the whole epoch maps."""
from __future__ import annotations

import asyncio

from cluster_helpers import set_partition_count
from minibroker.cluster import Cluster
from minibroker.log.batch import build_batch
from minibroker.network.client import KafkaClientConnection
from minibroker.protocol.errors import INVALID_PARTITION_METADATA
from minibroker.protocol.messages import (FetchRequestKip253, PartitionLeaderEpochsForPartitionsRequest,
                                          ProduceRequestKip253)

Fetch = FetchRequestKip253
Produce = ProduceRequestKip253


async def _leader_conn(c: Cluster, topic: str, partition: int) -> KafkaClientConnection:
    b = c.brokers[await c.leader_of(topic, partition)]
    return await KafkaClientConnection.connect(b.host, b.port)


async def _produce(conn, topic, partition, count, records=None, answer=False):
    T = Produce.TopicProduceData
    records = records or bytes(build_batch([(b"k", b"v", [])]))
    req = Produce(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[T(
        name=topic, undeleted_partition_count=count,
        partition_data=[T.PartitionProduceData(index=partition, records=records)])])
    resp = await conn.request(req, 9)
    p = resp.responses[0].partition_responses[0]
    return (p.error_code, p.base_offset) if answer else p.error_code


async def _fetch(conn, topic, partition, count):
    T = Fetch.FetchTopic
    req = Fetch(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[T(
                    topic=topic, undeleted_partition_count=count, partitions=[T.FetchPartition(
                        partition=partition, current_leader_epoch=-1, fetch_offset=0,
                        last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[], rack_id="")
    resp = await conn.request(req, 12)
    return resp.responses[0].partitions[0].error_code


async def test_stale_and_newer_counts_are_refused_on_every_partition():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 2, 3)
        await set_partition_count(c, "t", 4)
        for pid in range(4):
            conn = await _leader_conn(c, "t", pid)
            try:
                assert await _produce(conn, "t", pid, 2) == INVALID_PARTITION_METADATA   # older
                assert await _produce(conn, "t", pid, 5) == INVALID_PARTITION_METADATA   # newer
                assert await _produce(conn, "t", pid, 4) == 0
                assert await _produce(conn, "t", pid, -1) == 0                           # legacy
                assert await _fetch(conn, "t", pid, 2) == INVALID_PARTITION_METADATA
                assert await _fetch(conn, "t", pid, 8) == INVALID_PARTITION_METADATA
                assert await _fetch(conn, "t", pid, 4) == 0
                assert await _fetch(conn, "t", pid, -1) == 0
            finally:
                conn.close()


async def test_a_retried_batch_the_log_holds_is_answered_whatever_the_count():
    """An idempotent batch sent with count 2, answered by nothing the client saw (a timeout), then
    retried after the expansion: its offsets, not "stale" (the client would partition its records
    again under sequence numbers the log holds, and a later batch with those numbers would be
    acknowledged at this one's offsets: seed 345 of the simulation lost records so)."""
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 2, 3)
        pid = dict(producer_id=4242, producer_epoch=0)
        held = bytes(build_batch([(b"a", b"1", []), (b"b", b"2", [])], base_sequence=0, **pid))
        later = bytes(build_batch([(b"c", b"3", [])], base_sequence=2, **pid))
        conn = await _leader_conn(c, "t", 0)
        try:
            assert await _produce(conn, "t", 0, 2) == 0                 # offset 0, no producer
            assert await _produce(conn, "t", 0, 2, held, answer=True) == (0, 1)
            await set_partition_count(c, "t", 4)
            assert await _produce(conn, "t", 0, 2, held, answer=True) == (0, 1)    # duplicate
            assert await _produce(conn, "t", 0, 2, later) == INVALID_PARTITION_METADATA
            assert await _produce(conn, "t", 0, 4, later, answer=True) == (0, 3)
        finally:
            conn.close()


async def test_writes_into_marked_partitions_are_refused_reads_are_not():
    async with Cluster(brokers=3, partition_deletion_check_interval_ms=3_600_000) as c:
        await c.create_topic("t", 2, 3)
        await set_partition_count(c, "t", 4)
        conn = await _leader_conn(c, "t", 3)
        assert await _produce(conn, "t", 3, 4) == 0
        conn.close()
        assert (await c.controller.create_partitions("t", 2, None, False)).error_code == 0
        for _ in range(200):
            p = c.brokers[await c.leader_of("t", 3)].replica_manager.get("t", 3)
            if p.leader_epoch_before_deletion:
                break
            await asyncio.sleep(0.01)
        conn = await _leader_conn(c, "t", 3)
        try:
            assert await _produce(conn, "t", 3, -1) == INVALID_PARTITION_METADATA
            assert await _produce(conn, "t", 3, 2) == INVALID_PARTITION_METADATA
            assert await _fetch(conn, "t", 3, 2) == 0          # draining is allowed
            assert await _fetch(conn, "t", 3, -1) == 0
        finally:
            conn.close()


async def test_partition_leader_epochs_for_partitions_returns_whole_maps():
    async with Cluster(brokers=3, partition_deletion_check_interval_ms=3_600_000) as c:
        await c.create_topic("t", 2, 3)
        assert (await c.controller.create_partitions("t", 4, None, False)).error_code == 0
        assert (await c.controller.create_partitions("t", 3, None, False)).error_code == 0
        await asyncio.sleep(0.1)
        b = c.brokers[1]
        conn = await KafkaClientConnection.connect(b.host, b.port)
        T = PartitionLeaderEpochsForPartitionsRequest.PartitionLeaderEpochsForPartitionsRequestTopic
        resp = await conn.request(PartitionLeaderEpochsForPartitionsRequest(
            topics=[T(topic="t", partitions=[0, 2, 3, 9]), T(topic="nope", partitions=[0])]), 0)
        conn.close()
        t, nope = resp.topics
        assert nope.error_code == 3 and t.error_code == 0
        by = {p.partition: p for p in t.partitions}
        pairs = lambda es: [(e.partition_index, e.leader_epoch) for e in es]  # noqa: E731
        assert pairs(by[0].leader_epoch_after_creation) == []
        assert pairs(by[2].leader_epoch_after_creation) == [(0, 0), (1, 0)]
        assert pairs(by[3].leader_epoch_after_creation) == [(0, 0), (1, 0)]
        assert pairs(by[3].leader_epoch_before_deletion) == [(0, 1), (1, 1), (2, 0)]
        assert pairs(by[2].leader_epoch_before_deletion) == []
        assert by[9].error_code == 3
