"""DescribeQuorum (key 55) against an in-process cluster: the leader, its epoch, each voter's
log end offset, the observers (brokers that are not voters), and a stopped voter."""
from __future__ import annotations

import pytest
from kafka.errors import UnknownTopicOrPartitionError
from kafka.protocol.admin import DescribeQuorumRequest

from cluster_helpers import request_once, wait_until
from minibroker.cluster import Cluster
from minibroker.controller.quorum import MetadataQuorum

pytestmark = pytest.mark.timeout(60)
T = DescribeQuorumRequest.TopicData


def request(topic="__cluster_metadata", partition=0):
    return DescribeQuorumRequest(topics=[T(topic_name=topic, partitions=[
        T.PartitionData(partition_index=partition)])])


async def describe(c: Cluster, broker_id: int, version: int = 2):
    resp = await request_once(c, broker_id, request(), version)
    assert resp.error_code == 0
    (topic,) = resp.topics
    assert topic.topic_name == "__cluster_metadata"
    (p,) = topic.partitions
    assert p.error_code == 0 and p.partition_index == 0
    return p


async def test_leader_voters_and_observers_then_a_voter_stops():
    async with Cluster(brokers=4, controller_quorum_voters=(1, 2, 3), seed=1) as c:
        now = c.clock.now_ms()
        p = await describe(c, 4)            # every broker answers, observers included
        assert (p.leader_id, p.leader_epoch) == (c.quorum.leader_id, c.quorum.epoch)
        assert p.leader_id in (1, 2, 3) and p.leader_epoch >= 1
        hw = len(c.quorum.leader_log())
        assert p.high_watermark == hw > 0
        assert [(v.replica_id, v.log_end_offset) for v in p.current_voters] == \
            [(1, hw), (2, hw), (3, hw)]
        assert all(v.last_caught_up_timestamp >= now for v in p.current_voters)
        assert [(o.replica_id, o.log_end_offset) for o in p.observers] == [(4, hw)]

        stopped = [v for v in (1, 2, 3) if v != p.leader_id][0]
        await c.stop_broker(stopped)
        await c.create_topic("after", 1, 1)
        await wait_until(lambda: len(c.quorum.leader_log()) > hw)
        p = await describe(c, 4, version=1)
        voters = {v.replica_id: v for v in p.current_voters}
        assert set(voters) == {1, 2, 3}
        assert voters[stopped].log_end_offset < p.high_watermark
        assert (voters[stopped].last_fetch_timestamp,
                voters[stopped].last_caught_up_timestamp) == (-1, -1)
        assert voters[p.leader_id].log_end_offset == p.high_watermark


async def test_another_partition_is_unknown():
    async with Cluster(brokers=1, seed=1) as c:
        resp = await request_once(c, 1, request("__cluster_metadata", 1), 0)
        assert resp.topics[0].partitions[0].error_code == UnknownTopicOrPartitionError.errno


def test_stopped_voters_are_described_by_their_copy_alone():
    q = MetadataQuorum([1, 2, 3])
    q.voter_started(1)
    assert q.elect() == 1
    everyone = q.describe(1000, observers=[1, 2, 3])         # 2 and 3 stopped
    assert [(r.replica_id, r.last_fetch_timestamp) for r in everyone.voters] == \
        [(1, 1000), (2, -1), (3, -1)] and everyone.observers == ()
