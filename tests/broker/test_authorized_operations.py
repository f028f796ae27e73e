"""authorized_operations when asked (KIP-430: every operation while there are no ACLs, Kafka's bit
sets), DescribeGroups v6, DescribeCluster v2, and DescribeTopicPartitions (75, KIP-966) with its
cursor, over the wire; then kafka-python's admin client asking for operations."""
from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka import KafkaConsumer
from kafka.errors import GroupIdNotFoundError, InvalidRequestError, UnknownTopicOrPartitionError
from kafka.protocol.admin import (DescribeClusterRequest, DescribeGroupsRequest,
                                  DescribeTopicPartitionsRequest)
from kafka.protocol.metadata import MetadataRequest

from minibroker.broker import acl_operations as ops
from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection

pytestmark = pytest.mark.timeout(60)
OMITTED = None        # kafka-python decodes Kafka's -2^31 as None, a bit set as its bits' set
# Kafka's AclOperation codes allowed on each resource type while there are no ACLs
TOPIC_ALL = {3, 4, 5, 6, 7, 8, 10, 11}
GROUP_ALL = {3, 6, 8}
CLUSTER_ALL = {5, 7, 8, 9, 10, 11, 12}


async def connect(c: Cluster, broker_id: int = 1) -> KafkaClientConnection:
    b = c.brokers[broker_id]
    return await KafkaClientConnection.connect(b.host, b.port)


def test_bit_sets_are_kafkas():
    assert (ops.TOPIC_OPERATIONS, ops.GROUP_OPERATIONS, ops.CLUSTER_OPERATIONS) == (
        TOPIC_ALL, GROUP_ALL, CLUSTER_ALL)
    assert [ops.bits(o) for o in (ops.TOPIC_OPERATIONS, ops.GROUP_OPERATIONS,
                                  ops.CLUSTER_OPERATIONS, None)] == [3576, 328, 8096, -(2**31)]


async def test_metadata_describe_cluster_and_groups_fill_operations_when_asked():
    async with Cluster(brokers=2, racks=("r1", "r2")) as c:
        await c.create_topic("t", 2, 2)
        conn = await connect(c)
        T = MetadataRequest.MetadataRequestTopic
        for asked in (True, False, True):       # the cached answers follow the flags
            resp = await conn.request(MetadataRequest(
                topics=[T(name="t", topic_id=uuid.UUID(int=0))], allow_auto_topic_creation=False,
                include_cluster_authorized_operations=asked,
                include_topic_authorized_operations=asked), 10)
            assert resp.authorized_operations == (CLUSTER_ALL if asked else OMITTED)
            assert resp.topics[0].authorized_operations == (TOPIC_ALL if asked else OMITTED)
        resp = await conn.request(MetadataRequest(
            topics=None, allow_auto_topic_creation=False,
            include_topic_authorized_operations=True), 12)
        assert [t.authorized_operations for t in resp.topics] == [TOPIC_ALL]

        for version in (0, 1, 2):
            resp = await conn.request(DescribeClusterRequest(
                include_cluster_authorized_operations=True, endpoint_type=1,
                include_fenced_brokers=True), version)
            assert resp.error_code == 0 and resp.authorized_operations == CLUSTER_ALL
            assert [(b.broker_id, b.rack) for b in resp.brokers] == [(1, "r1"), (2, "r2")]
            if version == 2:
                assert [b.is_fenced for b in resp.brokers] == [False, False]
        resp = await conn.request(DescribeClusterRequest(
            include_cluster_authorized_operations=False), 2)
        assert resp.authorized_operations == OMITTED



async def test_describe_groups_operations_for_a_kafka_python_group():
    async with Cluster(brokers=1, group_initial_rebalance_delay_ms=0,
                       offsets_topic_replication_factor=1) as c:
        await c.create_topic("t", 1, 1)
        conn = await connect(c)

        def consume():
            consumer = KafkaConsumer("t", bootstrap_servers=c.bootstrap, group_id="g",
                                     consumer_timeout_ms=3000)
            for _ in consumer:
                pass
            return consumer
        consumer = await asyncio.to_thread(consume)
        try:
            resp = await conn.request(DescribeGroupsRequest(
                groups=["g"], include_authorized_operations=True), 6)
            g = resp.groups[0]
            assert (g.error_code, g.group_state, g.authorized_operations) == (0, "Stable",
                                                                              GROUP_ALL)
            resp = await conn.request(DescribeGroupsRequest(
                groups=["g"], include_authorized_operations=False), 5)
            assert resp.groups[0].authorized_operations is OMITTED
            # an unknown group: Dead without an error before v6, GROUP_ID_NOT_FOUND from v6
            for version, code, message in ((5, 0, None), (6, GroupIdNotFoundError.errno,
                                                          "Group nope not found.")):
                resp = await conn.request(DescribeGroupsRequest(
                    groups=["nope"], include_authorized_operations=True), version)
                g = resp.groups[0]
                assert (g.error_code, g.group_state) == (code, "Dead")
                if version == 6:
                    assert g.error_message == message
        finally:
            await asyncio.to_thread(consumer.close)


async def test_describe_topic_partitions_pages_with_a_cursor():
    async with Cluster(brokers=1) as c:
        await c.create_topic("a", 3, 1)
        await c.create_topic("b", 2, 1)
        await c.create_topic("c", 1, 1)
        conn = await connect(c)
        R = DescribeTopicPartitionsRequest

        async def page(topics, limit, cursor=None):
            resp = await conn.request(R(topics=[R.TopicRequest(name=n) for n in topics],
                                        response_partition_limit=limit, cursor=cursor), 0)
            got = [(t.name, t.error_code, [p.partition_index for p in t.partitions])
                   for t in resp.topics]
            nxt = resp.next_cursor
            return got, None if nxt is None else (nxt.topic_name, nxt.partition_index)

        assert await page([], 4) == ([("a", 0, [0, 1, 2]), ("b", 0, [0])], ("b", 1))
        assert await page([], 4, R.Cursor(topic_name="b", partition_index=1)) == (
            [("b", 0, [1]), ("c", 0, [0])], None)
        assert await page([], 3) == ([("a", 0, [0, 1, 2])], ("b", 0))
        assert await page(["c", "nope", "a"], 100) == (
            [("a", 0, [0, 1, 2]), ("c", 0, [0]), ("nope", UnknownTopicOrPartitionError.errno, [])],
            None)
        assert await page(["a"], 10, R.Cursor(topic_name="b", partition_index=0)) == (
            [("a", InvalidRequestError.errno, [])], None)
        resp = await conn.request(R(topics=[R.TopicRequest(name="a")],
                                    response_partition_limit=10, cursor=None), 0)
        t = resp.topics[0]
        assert t.topic_authorized_operations == 3576 and not t.is_internal    # an int32 here
        assert [(p.leader_id, p.replica_nodes, p.isr_nodes) for p in t.partitions] == [
            (1, [1], [1])] * 3
