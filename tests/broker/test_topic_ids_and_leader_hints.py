"""Fetch v13-17 and Produce v10-12 over the wire: topics named by id (KIP-516), UNKNOWN_TOPIC_ID for
an id the broker does not know, fetch sessions and forgotten topics by id, the replica id in v15's
replica_state; KIP-951 leader discovery hints: a Fetch (v16+) partition answered
NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH, and a Produce (v10+) partition answered
NOT_LEADER_OR_FOLLOWER, name the current leader and epoch, and the response carries that leader's
endpoint; older versions leave both out."""
from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka.errors import FencedLeaderEpochError, NotLeaderForPartitionError, UnknownTopicIdError
from kafka.protocol.consumer import FetchRequest

from minibroker.cluster import Cluster
from minibroker.log.batch import build_batch
from tests.cluster_helpers import connect, fetched_records, produce_request

T, P, F = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition, FetchRequest.ForgottenTopic


def fetch(topic_id, parts, sid=0, epoch=-1, forgotten=(), **kw) -> FetchRequest:
    return FetchRequest(
        max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=sid,
        session_epoch=epoch, rack_id="", **kw,
        topics=[T(topic_id=topic_id, partitions=[
            P(partition=p, current_leader_epoch=e, fetch_offset=o, last_fetched_epoch=-1,
              log_start_offset=-1, partition_max_bytes=1 << 20) for p, o, e in parts])] if parts else [],
        forgotten_topics_data=[F(topic_id=topic_id, partitions=list(forgotten))] if forgotten else [])


def answers(resp):
    return sorted((t.topic_id, p.partition_index, p.error_code, p.high_watermark)
                  for t in resp.responses for p in t.partitions)


async def cluster_with_records(c: Cluster):
    await c.create_topic("t", 2, 2)
    leader = await c.leader_of("t", 0)
    p0 = c.brokers[leader].replica_manager.get("t", 0)
    p0.log.append_as_leader(build_batch([(b"k", b"v0", []), (b"k", b"v1", [])]), p0.leader_epoch)
    p0.notify_data()        # as a Produce does: the follower's long poll returns the records
    for _ in range(500):
        if p0.high_watermark == 2:
            break
        await asyncio.sleep(0.001)
    assert p0.high_watermark == 2
    return leader, c.brokers[leader].metadata.topics["t"].topic_id


@pytest.mark.parametrize("version", [13, 14, 15, 16, 17])
async def test_fetch_by_topic_id_and_unknown_id(version):
    async with Cluster(brokers=2) as c:
        leader, tid = await cluster_with_records(c)
        conn = await connect(c, leader)
        kw = {"replica_state": FetchRequest.ReplicaState(replica_id=-1, replica_epoch=-1)} \
            if version >= 15 else {"replica_id": -1}
        resp = await conn.request(fetch(tid, [(0, 0, -1)], **kw), version)
        assert [t.topic_id for t in resp.responses] == [tid]
        assert fetched_records(resp) == [(0, b"v0"), (1, b"v1")]
        unknown = uuid.UUID(int=tid.int ^ 1)
        resp = await conn.request(fetch(unknown, [(0, 0, -1), (1, 0, -1)]), version)
        assert answers(resp) == [(unknown, 0, UnknownTopicIdError.errno, -1),
                                 (unknown, 1, UnknownTopicIdError.errno, -1)]
        conn.close()


async def test_fetch_session_by_topic_id_forgets_by_id():
    async with Cluster(brokers=2) as c:
        leader, tid = await cluster_with_records(c)
        p1_leader = await c.leader_of("t", 1)
        conn = await connect(c, leader)
        parts = [(0, 0, -1)] + ([(1, 0, -1)] if p1_leader == leader else [])
        resp = await conn.request(fetch(tid, parts, sid=0, epoch=0), 13)
        sid = resp.session_id
        assert sid > 0 and (tid, 0, 0, 2) in answers(resp)
        resp = await conn.request(fetch(tid, [(0, 2, -1)], sid=sid, epoch=1), 13)
        assert answers(resp) == []                       # nothing new
        resp = await conn.request(fetch(tid, [], sid=sid, epoch=2, forgotten=[0]), 13)
        assert ("t", 0) not in c.brokers[leader].fetch_sessions._sessions[sid].partitions
        conn.close()


def hint(part, resp):
    """(error code, current leader as (id, epoch) or None, endpoints as (id, host, port))."""
    cl = getattr(part, "current_leader", None)
    return (part.error_code, None if cl is None else (cl.leader_id, cl.leader_epoch),
            [(e.node_id, e.host, e.port) for e in getattr(resp, "node_endpoints", None) or ()])


async def test_kip951_hints_from_fetch_v16_and_produce_v10_only():
    async with Cluster(brokers=2) as c:
        leader, tid = await cluster_with_records(c)
        follower = next(b for b in sorted(c.brokers) if b != leader)
        epoch = c.brokers[leader].replica_manager.get("t", 0).leader_epoch
        lb = c.brokers[leader]
        moved = (NotLeaderForPartitionError.errno, (leader, epoch), [(leader, lb.host, lb.port)])
        conn = await connect(c, follower)
        resp = await conn.request(fetch(tid, [(0, 0, -1)]), 16)
        assert hint(resp.responses[0].partitions[0], resp) == moved
        req = produce_request("t", 0, build_batch([(b"k", b"v", [])]), acks=1)
        resp = await conn.request(req, 10)
        assert hint(resp.responses[0].partition_responses[0], resp) == moved
        # Older versions leave the hints out, as Kafka does.
        resp = await conn.request(fetch(tid, [(0, 0, -1)]), 15)
        assert hint(resp.responses[0].partitions[0], resp) == (moved[0], None, [])
        resp = await conn.request(req, 9)
        assert hint(resp.responses[0].partition_responses[0], resp) == (moved[0], None, [])
        # A stale epoch on the leader: FENCED_LEADER_EPOCH, with the hint too.
        await c.move_leader("t", 0, follower)
        await c.move_leader("t", 0, leader)
        new_epoch = c.brokers[leader].replica_manager.get("t", 0).leader_epoch
        lconn = await connect(c, leader)
        resp = await lconn.request(fetch(tid, [(0, 0, epoch)]), 17)
        assert hint(resp.responses[0].partitions[0], resp) == \
            (FencedLeaderEpochError.errno, (leader, new_epoch), [(leader, lb.host, lb.port)])
        conn.close()
        lconn.close()
