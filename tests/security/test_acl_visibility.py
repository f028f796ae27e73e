"""What a principal sees with ACLs on: Metadata and ListGroups hide what it may not DESCRIBE,
DescribeTopicPartitions too; authorized_operations (Metadata, DescribeCluster, DescribeGroups)
are the ACLs' answer; the inter-broker APIs demand CLUSTER_ACTION and a stranger's far-ahead
controller epoch wedges nothing."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import ClusterAuthorizationFailedError, TopicAuthorizationFailedError
from kafka.protocol.admin import (DescribeClusterRequest, DescribeGroupsRequest,
                                  DescribeTopicPartitionsRequest, ListGroupsRequest)
from kafka.protocol.consumer import (JoinGroupRequest, ListOffsetsRequest, OffsetCommitRequest,
                                     OffsetFetchRequest)
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from minibroker.cluster import Cluster
from minibroker.network import memory
from minibroker.protocol.messages import (ConsumerGroupDescribeRequest,
                                          ConsumerGroupHeartbeatRequest, LeaderAndIsrRequest)
from minibroker.security.acl import AclOperation as Op, ResourceType as RT
from minibroker.security.principal import KafkaPrincipal
from tests.security.acl_helpers import STANDARD, allow, connect_as

pytestmark = pytest.mark.timeout(60)


async def until(cond):
    for _ in range(500):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("never")


def _meta(names=None):
    return MetadataRequest(topics=None if names is None else [
        MetadataRequest.MetadataRequestTopic(name=n, topic_id=None) for n in names],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True)


async def test_metadata_list_groups_and_operations_follow_the_acls():
    async with Cluster(brokers=1, authorizer_class_name=STANDARD, super_users="User:admin",
                       offsets_topic_replication_factor=1, offsets_topic_num_partitions=1,
                       group_initial_rebalance_delay_ms=0) as c:
        for t in ("shown", "hidden"):
            await c.create_topic(t, 1, 1)
        await c.channel.create_acls([
            allow("User:alice", Op.WRITE, RT.TOPIC, "shown"),
            allow("User:alice", Op.DESCRIBE, RT.GROUP, "g-seen"),
            allow("User:alice", Op.IDEMPOTENT_WRITE, RT.CLUSTER, "kafka-cluster")])
        b = c.brokers[1]
        await until(lambda: len(b.authorizer.acls) == 3)
        admin, alice = connect_as(b, "User:admin"), connect_as(b, "User:alice")
        for g in ("g-seen", "g-other"):
            for _ in range(100):                    # the coordinator's topic is created first
                r = await admin.request(FindCoordinatorRequest(key=g, key_type=0), 3)
                if r.error_code == 0:
                    break
                await asyncio.sleep(0.05)
            if g == "g-seen":                       # offsets first: no rebalance under way
                C = OffsetCommitRequest.OffsetCommitRequestTopic
                r = await admin.request(OffsetCommitRequest(
                    group_id="g-seen", generation_id_or_member_epoch=-1, member_id="",
                    retention_time_ms=-1, topics=[C(name=n, partitions=[C.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=0, committed_metadata="")])
                        for n in ("hidden", "shown")]), 5)
                assert [p.error_code for t in r.topics for p in t.partitions] == [0, 0]
            await admin.request(JoinGroupRequest(
                group_id=g, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                group_instance_id=None, protocol_type="consumer", protocols=[
                    JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]), 3)
        md = await alice.request(_meta(), 8)
        assert [t.name for t in md.topics] == ["shown"]
        # WRITE implies DESCRIBE. Metadata shows the cluster's operations only to a principal
        # that may DESCRIBE the cluster (IDEMPOTENT_WRITE does not imply it); DescribeCluster
        # shows them to anyone who asks, as Kafka's handlers.
        assert md.topics[0].authorized_operations == {int(Op.WRITE), int(Op.DESCRIBE)}
        assert md.authorized_operations == set()
        md = await alice.request(_meta(["hidden", "shown", "absent"]), 8)
        assert [(t.name, t.error_code) for t in md.topics] == [
            ("hidden", TopicAuthorizationFailedError.errno), ("shown", 0),
            ("absent", TopicAuthorizationFailedError.errno)]
        md = await admin.request(_meta(), 8)
        assert {"shown", "hidden"} <= {t.name for t in md.topics}
        assert md.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
        lg = await alice.request(ListGroupsRequest(states_filter=[]), 4)
        assert [g.group_id for g in lg.groups] == ["g-seen"]
        lg = await admin.request(ListGroupsRequest(states_filter=[]), 4)
        assert sorted(g.group_id for g in lg.groups) == ["g-other", "g-seen"]
        for v in (7, 8):                            # all topics: the hidden one is left out
            of = await alice.request(OffsetFetchRequest(
                group_id="g-seen", topics=None, require_stable=False, groups=[
                    OffsetFetchRequest.OffsetFetchRequestGroup(group_id="g-seen", topics=None)]),
                v)
            topics = of.topics if v < 8 else of.groups[0].topics
            assert [t.name for t in topics] == ["shown"], v
        dg = await alice.request(DescribeGroupsRequest(groups=["g-seen"],
                                                       include_authorized_operations=True), 5)
        assert dg.groups[0].authorized_operations == {int(Op.DESCRIBE)}
        dc = await alice.request(DescribeClusterRequest(include_cluster_authorized_operations=True,
                                                        endpoint_type=1), 1)
        assert dc.authorized_operations == {int(Op.IDEMPOTENT_WRITE)}
        bob = connect_as(b, "User:bob")             # no DESCRIBE on the cluster: none shown
        md = await bob.request(_meta(), 8)
        assert (md.topics, md.authorized_operations) == ([], set())
        hb = await admin.request(ConsumerGroupHeartbeatRequest(
            group_id="g848", member_id="m848-0000000000000", member_epoch=0, instance_id=None,
            rack_id=None, rebalance_timeout_ms=10000, subscribed_topic_names=["shown"],
            subscribed_topic_regex=None, server_assignor=None, topic_partitions=[]), 0)
        assert hb.error_code == 0
        cgd = await admin.request(ConsumerGroupDescribeRequest(
            group_ids=["g848"], include_authorized_operations=True), 0)
        assert cgd.groups[0].authorized_operations == sum(
            1 << op for op in (Op.READ, Op.DESCRIBE, Op.DELETE))
        dtp = await alice.request(DescribeTopicPartitionsRequest(
            topics=[], response_partition_limit=100, cursor=None), 0)
        assert [t.name for t in dtp.topics] == ["shown"]


async def test_inter_broker_apis_demand_cluster_action_and_a_far_epoch_wedges_nothing():
    async with Cluster(brokers=2, authorizer_class_name=STANDARD) as c:
        await c.create_topic("t", 1, 2)        # the in-process control plane works unauthorised
        b = c.brokers[1]
        conns: dict = {}
        stranger = memory.connect(b.control_handle, connections=conns)
        memory.server_of(stranger).principal = KafkaPrincipal("User", "mallory")
        r = await stranger.request(LeaderAndIsrRequest(
            controller_id=2, is_k_raft_controller=False, controller_epoch=2**31 - 1,
            broker_epoch=b.broker_epoch, request_type=0, topic_states=[], live_leaders=[]), 7)
        assert r.error_code == ClusterAuthorizationFailedError.errno
        assert b.replica_manager.check_controller_epoch(c.controller_epoch) == 0
        await c.create_topic("after", 1, 2)    # the controller still reaches the broker
        assert b.replica_manager.get("after", 0) is not None


async def test_a_null_name_under_the_authorizer_is_an_answer_or_a_clean_close(caplog):
    """Malformed input (a null topic or group name where none is allowed) reaching the
    authorization checks: Kafka's error, or the connection closed with one log line; never a
    traceback."""
    async with Cluster(brokers=1, authorizer_class_name=STANDARD) as c:
        b = c.brokers[1]
        P = ListOffsetsRequest.ListOffsetsTopic
        conn = connect_as(b, "User:alice")
        r = await conn.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[P(
            name=None, partitions=[P.ListOffsetsPartition(partition_index=0, timestamp=-1)])]),
            7)
        # no topic has a null name: unknown, as for a topic id this broker does not know
        assert [p.error_code for t in r.topics for p in t.partitions] == [3]
        r = await conn.request(JoinGroupRequest(
            group_id=None, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
            group_instance_id=None, protocol_type="consumer", protocols=[]), 3)
        assert r.error_code == 30                   # GROUP_AUTHORIZATION_FAILED
        assert not any(r.exc_info for r in caplog.records)
