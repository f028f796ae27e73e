"""Clients cannot produce to the internal topics (issue 25, item 2): Kafka's ReplicaManager answers
INVALID_TOPIC_EXCEPTION ("Cannot append to internal topic"); the group coordinator's own writes to
__consumer_offsets still work, and a forged commit record never reaches the log.

A real 3-broker cluster over loopback sockets.
"""
from __future__ import annotations


import pytest
from kafka.errors import InvalidTopicError
from kafka.protocol.consumer import OffsetFetchRequest

from cluster_helpers import batch, connect, find_coordinator, log_bytes, produce_request
from minibroker.cluster import Cluster
from minibroker.coordinator.offsets import OFFSETS_TOPIC
from kafka.protocol.consumer import OffsetCommitRequest

GROUP = "cg"
_CTopic = OffsetCommitRequest.OffsetCommitRequestTopic


def offsets_logs(c: Cluster) -> dict:
    return {(b, p): log_bytes(c, b, OFFSETS_TOPIC, p) for b in c.brokers
            for (t, p) in c.brokers[b].replica_manager.partitions if t == OFFSETS_TOPIC}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("topic", [OFFSETS_TOPIC, "__transaction_state"])
async def test_client_produce_to_internal_topic_is_invalid_topic(topic):
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 1, 3)
        conn = await connect(c, 1, "finder")
        coord = await find_coordinator(conn, GROUP)          # creates __consumer_offsets
        conn.close()
        before = offsets_logs(c)
        led = sorted(p for (t, p), part in c.brokers[coord].replica_manager.partitions.items()
                     if t == OFFSETS_TOPIC and part.leader == coord)
        assert led
        conn = await connect(c, coord, "forger")
        for acks in (0, 1, -1):
            for p in led[:3]:
                resp = await conn.request(produce_request(topic, p, batch([b"forged"], 0),
                                                          acks=acks), 9)
                if acks == 0:
                    assert resp is None
                    continue
                [rp] = resp.responses[0].partition_responses
                assert (rp.error_code, rp.base_offset) == (InvalidTopicError.errno, -1)
                assert rp.error_message == f"Cannot append to internal topic {topic}"
        assert offsets_logs(c) == before
        # The coordinator's own append (a simple consumer's commit) still lands.
        r = await conn.request(OffsetCommitRequest(
            group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[_CTopic(name="t", partitions=[_CTopic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=42, committed_leader_epoch=-1,
                committed_metadata="m")])]), 8)
        assert [p.error_code for t in r.topics for p in t.partitions] == [0]
        r = await conn.request(OffsetFetchRequest(group_id=GROUP, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]), 5)
        assert [(p.committed_offset, p.error_code) for t in r.topics for p in t.partitions] == [
            (42, 0)]
        conn.close()
