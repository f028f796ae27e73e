"""Every served API key × every kind of caller, with the authorizer on (must-show 2).

For each API: a principal without ACLs gets exactly Kafka's error and nothing is written or
changed (state compared before and after); a principal holding the ACLs Kafka's KafkaApis asks
for, and a super user, are served (no authorization error). Where Kafka checks two things (a
group and its topics, a transactional id and its topics) a "half" principal holding the first
gets the second's error. Callers are connections given a principal, as SASL or TLS would give
it: CALLERS is where the unauthenticated and wrong-password callers join (they get the close a
failed authentication gets) once listeners authenticate.
"""
from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka.errors import (ClusterAuthorizationFailedError as ClusterDenied,
                          GroupAuthorizationFailedError as GroupDenied,
                          TopicAuthorizationFailedError as TopicDenied,
                          TransactionalIdAuthorizationFailedError as TxnDenied)
from kafka.protocol import admin as A
from kafka.protocol.consumer import (JoinGroupRequest, HeartbeatRequest, LeaveGroupRequest,
                                     ListOffsetsRequest, OffsetCommitRequest, OffsetDeleteRequest,
                                     OffsetFetchRequest, OffsetForLeaderEpochRequest,
                                     SyncGroupRequest)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest,
                                     EndTxnRequest, InitProducerIdRequest, TxnOffsetCommitRequest,
                                     WriteTxnMarkersRequest)

from cluster_helpers import batch, produce_request
from minibroker.broker import dispatch
from minibroker.client import scram_admin
from minibroker.cluster import Cluster
from minibroker.network import memory
from minibroker.protocol import messages as M
from minibroker.security.acl import (CLUSTER_NAME, AclOperation as Op, ResourceType as RT)
from minibroker.security.principal import KafkaPrincipal
from tests.security.acl_helpers import STANDARD, allow

pytestmark = pytest.mark.timeout(120)
T, G, X = "t", "g", "tx"
AUTH_ERRORS = {TopicDenied.errno, GroupDenied.errno, ClusterDenied.errno, TxnDenied.errno}
CALLERS = ("none", "granted", "super")          # + "unauthenticated", "wrong password" (auth)


def topic(op):
    return (op, RT.TOPIC, T)


def group(op):
    return (op, RT.GROUP, G)


def txn(op):
    return (op, RT.TRANSACTIONAL_ID, X)


def cluster(op):
    return (op, RT.CLUSTER, CLUSTER_NAME)


class Case:
    def __init__(self, key, version, build, needs, code, half=(), half_code=0, control=False,
                 name="", half_writes=False):
        self.key, self.version, self.build, self.needs, self.code = key, version, build, needs, code
        self.half, self.half_code, self.control = half, half_code, control
        self.half_writes = half_writes      # the half principal is served in part (it writes)
        self.name = name or f"{key}"


def _lo_topics(version=7):
    P = ListOffsetsRequest.ListOffsetsTopic
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[P(name=T, partitions=[
        P.ListOffsetsPartition(partition_index=0, timestamp=-1, current_leader_epoch=-1)])])


def _fetch(replica_id=-1):
    F = M.FetchRequestKip253.FetchTopic
    return M.FetchRequestKip253(replica_id=replica_id, max_wait_ms=0, min_bytes=1,
                                max_bytes=1 << 20, isolation_level=0, session_id=0,
                                session_epoch=-1, topics=[F(topic=T, partitions=[F.FetchPartition(
                                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                                    current_leader_epoch=-1, log_start_offset=-1)])],
                                forgotten_topics_data=[], rack_id="")


def _control(cls, c, **kw):
    b = c.brokers[1]
    return cls(controller_id=1, is_k_raft_controller=False, controller_epoch=c.controller_epoch,
               broker_epoch=b.broker_epoch, **kw)


def _offset_commit():
    C = OffsetCommitRequest.OffsetCommitRequestTopic
    return OffsetCommitRequest(group_id=G, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, retention_time_ms=-1, topics=[C(
                                   name=T, partitions=[C.OffsetCommitRequestPartition(
                                       partition_index=0, committed_offset=1,
                                       committed_leader_epoch=-1, committed_metadata="")])])


def _txn_offset_commit():
    C = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    return TxnOffsetCommitRequest(transactional_id=X, group_id=G, producer_id=0, producer_epoch=0,
                                  generation_id=-1, member_id="", group_instance_id=None,
                                  topics=[C(name=T, partitions=[C.TxnOffsetCommitRequestPartition(
                                      partition_index=0, committed_offset=1,
                                      committed_leader_epoch=-1, committed_metadata="")])])


def _add_partitions():
    Tp = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
    return AddPartitionsToTxnRequest(v3_and_below_transactional_id=X, v3_and_below_producer_id=0,
                                     v3_and_below_producer_epoch=0,
                                     v3_and_below_topics=[Tp(name=T, partitions=[0])])


def _markers():
    W = WriteTxnMarkersRequest.WritableTxnMarker
    return WriteTxnMarkersRequest(markers=[W(producer_id=7, producer_epoch=0,
                                             transaction_result=False, coordinator_epoch=0,
                                             topics=[W.WritableTxnMarkerTopic(
                                                 name=T, partition_indexes=[0])])])


def _configs(cls, rtype, rname, entries):
    R = cls.AlterConfigsResource if hasattr(cls, "AlterConfigsResource") else None
    if cls is A.DescribeConfigsRequest:
        return cls(resources=[cls.DescribeConfigsResource(
            resource_type=rtype, resource_name=rname, configuration_keys=None)],
            include_synonyms=False, include_documentation=False)
    if cls is A.AlterConfigsRequest:
        return cls(resources=[R(resource_type=rtype, resource_name=rname, configs=[
            R.AlterableConfig(name=k, value=v) for k, v in entries])], validate_only=False)
    return cls(resources=[R(resource_type=rtype, resource_name=rname, configs=[
        R.AlterableConfig(name=k, config_operation=0, value=v) for k, v in entries])],
        validate_only=False)


def _cg_heartbeat():
    return M.ConsumerGroupHeartbeatRequest(
        group_id=G, member_id=str(uuid.UUID(int=5)), member_epoch=0, instance_id=None,
        rack_id=None, rebalance_timeout_ms=10000, subscribed_topic_names=[T],
        subscribed_topic_regex=None, server_assignor=None, topic_partitions=[])


CASES = [
    Case(0, 9, lambda c: produce_request(T, 0, batch([b"x"], 0)), [topic(Op.WRITE)],
         TopicDenied.errno),
    Case(1, 12, lambda c: _fetch(), [topic(Op.READ)], TopicDenied.errno),
    Case(1, 12, lambda c: _fetch(replica_id=1), [cluster(Op.CLUSTER_ACTION)], TopicDenied.errno,
         name="1-follower"),
    Case(2, 7, lambda c: _lo_topics(), [topic(Op.DESCRIBE)], TopicDenied.errno),
    Case(3, 12, lambda c: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name=T, topic_id=None)], allow_auto_topic_creation=False), [topic(Op.DESCRIBE)],
        TopicDenied.errno),
    Case(3, 12, lambda c: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name="auto", topic_id=None)], allow_auto_topic_creation=True),
        [(Op.DESCRIBE, RT.TOPIC, "auto"), (Op.CREATE, RT.TOPIC, "auto")], TopicDenied.errno,
        half=[(Op.DESCRIBE, RT.TOPIC, "auto")], half_code=TopicDenied.errno, name="3-auto-create"),
    Case(4, 7, lambda c: _control(M.LeaderAndIsrRequest, c, request_type=0, topic_states=[],
                                  live_leaders=[]),
         [cluster(Op.CLUSTER_ACTION)], ClusterDenied.errno, control=True),
    Case(5, 4, lambda c: _control(M.StopReplicaRequest, c, topic_states=[
        M.StopReplicaRequest.StopReplicaTopicState(topic_name=T, partition_states=[
            M.StopReplicaRequest.StopReplicaTopicState.StopReplicaPartitionState(
                partition_index=0, leader_epoch=-1, delete_partition=True)])]),
         [cluster(Op.CLUSTER_ACTION)], ClusterDenied.errno, control=True),
    Case(6, 8, lambda c: _control(M.UpdateMetadataRequest, c, request_type=0, topic_states=[],
                                  max_partition_epoch=0, live_brokers=[
        M.UpdateMetadataRequest.UpdateMetadataBroker(id=1, endpoints=[
            M.UpdateMetadataRequest.UpdateMetadataBroker.UpdateMetadataEndpoint(
                port=1, host="10.9.9.9", listener="PLAINTEXT", security_protocol=0)],
            rack=None)]),
         [cluster(Op.CLUSTER_ACTION)], ClusterDenied.errno, control=True),
    Case(8, 8, lambda c: _offset_commit(), [group(Op.READ), topic(Op.READ)], GroupDenied.errno,
         half=[group(Op.READ)], half_code=TopicDenied.errno),
    Case(9, 7, lambda c: OffsetFetchRequest(group_id=G, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=T, partition_indexes=[0])],
        require_stable=False), [group(Op.DESCRIBE), topic(Op.DESCRIBE)], GroupDenied.errno,
        half=[group(Op.DESCRIBE)], half_code=TopicDenied.errno),
    Case(9, 8, lambda c: OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=G, topics=None)], require_stable=False), [group(Op.DESCRIBE)],
        GroupDenied.errno, name="9-v8"),
    Case(9, 8, lambda c: OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
        group_id=G, topics=[OffsetFetchRequest.OffsetFetchRequestGroup.OffsetFetchRequestTopics(
            name=T, partition_indexes=[0])])], require_stable=False),
        [group(Op.DESCRIBE), topic(Op.DESCRIBE)], GroupDenied.errno, half=[group(Op.DESCRIBE)],
        half_code=TopicDenied.errno, name="9-v8-topics"),
    Case(10, 3, lambda c: FindCoordinatorRequest(key=G, key_type=0), [group(Op.DESCRIBE)],
         GroupDenied.errno),
    Case(10, 4, lambda c: FindCoordinatorRequest(key_type=1, coordinator_keys=[X]),
         [txn(Op.DESCRIBE)], TxnDenied.errno, name="10-v4-txn"),
    Case(11, 7, lambda c: JoinGroupRequest(
        group_id=G, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
        group_instance_id=None, protocol_type="consumer", protocols=[
            JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]),
        [group(Op.READ)], GroupDenied.errno),
    Case(12, 4, lambda c: HeartbeatRequest(group_id=G, generation_id=1, member_id="m",
                                           group_instance_id=None), [group(Op.READ)],
         GroupDenied.errno),
    Case(13, 3, lambda c: LeaveGroupRequest(group_id=G, members=[
        LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None)]),
        [group(Op.READ)], GroupDenied.errno),
    Case(14, 5, lambda c: SyncGroupRequest(group_id=G, generation_id=1, member_id="m",
                                           group_instance_id=None, protocol_type="consumer",
                                           protocol_name="range", assignments=[]),
         [group(Op.READ)], GroupDenied.errno),
    Case(15, 5, lambda c: A.DescribeGroupsRequest(groups=[G], include_authorized_operations=True),
         [group(Op.DESCRIBE)], GroupDenied.errno),
    Case(16, 4, lambda c: A.ListGroupsRequest(states_filter=[]), [], 0),
    Case(18, 3, lambda c: ApiVersionsRequest(client_software_name="t",
                                             client_software_version="1"), [], 0),
    Case(19, 5, lambda c: A.CreateTopicsRequest(topics=[A.CreateTopicsRequest.CreatableTopic(
        name="new", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10000, validate_only=False),
        [(Op.CREATE, RT.TOPIC, "new"), (Op.DESCRIBE_CONFIGS, RT.TOPIC, "new")], TopicDenied.errno,
        half=[(Op.CREATE, RT.TOPIC, "new")], half_code=TopicDenied.errno, half_writes=True),
    Case(20, 5, lambda c: A.DeleteTopicsRequest(topic_names=[T], timeout_ms=10000),
         [topic(Op.DELETE)], TopicDenied.errno),
    Case(21, 1, lambda c: A.DeleteRecordsRequest(topics=[A.DeleteRecordsRequest.DeleteRecordsTopic(
        name=T, partitions=[A.DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(
            partition_index=0, offset=1)])], timeout_ms=10000), [topic(Op.DELETE)],
        TopicDenied.errno),
    Case(22, 4, lambda c: InitProducerIdRequest(transactional_id=X, transaction_timeout_ms=60000,
                                                producer_id=-1, producer_epoch=-1),
         [txn(Op.WRITE)], TxnDenied.errno),
    Case(22, 4, lambda c: InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1,
                                                producer_id=-1, producer_epoch=-1),
         [cluster(Op.IDEMPOTENT_WRITE)], ClusterDenied.errno, name="22-idempotent"),
    Case(23, 4, lambda c: OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=T, partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=-1, leader_epoch=0)])]),
        [topic(Op.DESCRIBE)], TopicDenied.errno),
    Case(23, 4, lambda c: OffsetForLeaderEpochRequest(replica_id=1, topics=[
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=T, partitions=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=-1, leader_epoch=0)])]),
        [cluster(Op.CLUSTER_ACTION)], TopicDenied.errno, name="23-follower"),
    Case(24, 3, lambda c: _add_partitions(), [txn(Op.WRITE), topic(Op.WRITE)], TxnDenied.errno,
         half=[txn(Op.WRITE)], half_code=TopicDenied.errno),
    Case(25, 3, lambda c: AddOffsetsToTxnRequest(transactional_id=X, producer_id=0,
                                                 producer_epoch=0, group_id=G),
         [txn(Op.WRITE), group(Op.READ)], TxnDenied.errno, half=[txn(Op.WRITE)],
         half_code=GroupDenied.errno),
    Case(26, 3, lambda c: EndTxnRequest(transactional_id=X, producer_id=0, producer_epoch=0,
                                        committed=False), [txn(Op.WRITE)], TxnDenied.errno),
    Case(27, 1, lambda c: _markers(), [cluster(Op.CLUSTER_ACTION)], ClusterDenied.errno),
    Case(28, 3, lambda c: _txn_offset_commit(), [txn(Op.WRITE), group(Op.READ), topic(Op.READ)],
         TxnDenied.errno, half=[txn(Op.WRITE), group(Op.READ)], half_code=TopicDenied.errno),
    Case(29, 3, lambda c: A.DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1),
        [cluster(Op.DESCRIBE)], ClusterDenied.errno),
    Case(30, 3, lambda c: A.CreateAclsRequest(creations=[A.CreateAclsRequest.AclCreation(
        resource_type=2, resource_name="x", resource_pattern_type=3, principal="User:z",
        host="*", operation=3, permission_type=3)]), [cluster(Op.ALTER)], ClusterDenied.errno),
    Case(31, 3, lambda c: A.DeleteAclsRequest(filters=[A.DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter="User:z", host_filter=None, operation=1, permission_type=1)]),
        [cluster(Op.ALTER)], ClusterDenied.errno),
    Case(32, 4, lambda c: _configs(A.DescribeConfigsRequest, 2, T, []),
         [topic(Op.DESCRIBE_CONFIGS)], TopicDenied.errno),
    Case(32, 4, lambda c: _configs(A.DescribeConfigsRequest, 4, "1", []),
         [cluster(Op.DESCRIBE_CONFIGS)], ClusterDenied.errno, name="32-broker"),
    Case(33, 1, lambda c: _configs(A.AlterConfigsRequest, 2, T, [("retention.ms", "1000")]),
         [topic(Op.ALTER_CONFIGS)], TopicDenied.errno),
    Case(35, 4, lambda c: A.DescribeLogDirsRequest(topics=None), [cluster(Op.DESCRIBE)],
         ClusterDenied.errno),
    Case(37, 3, lambda c: A.CreatePartitionsRequest(topics=[
        A.CreatePartitionsRequest.CreatePartitionsTopic(name=T, count=2, assignments=None)],
        timeout_ms=10000, validate_only=False), [topic(Op.ALTER)], TopicDenied.errno),
    Case(42, 2, lambda c: A.DeleteGroupsRequest(groups_names=[G]), [group(Op.DELETE)],
         GroupDenied.errno),
    Case(43, 2, lambda c: A.ElectLeadersRequest(election_type=0, topic_partitions=[
        A.ElectLeadersRequest.TopicPartitions(topic=T, partitions=[0])], timeout_ms=10000),
        [cluster(Op.ALTER)], ClusterDenied.errno),
    Case(44, 1, lambda c: _configs(A.IncrementalAlterConfigsRequest, 2, T,
                                   [("retention.ms", "1000")]),
         [topic(Op.ALTER_CONFIGS)], TopicDenied.errno),
    Case(44, 1, lambda c: _configs(A.IncrementalAlterConfigsRequest, 4, "",
                                   [("leader.replication.throttled.rate", "1000")]),
         [cluster(Op.ALTER_CONFIGS)], ClusterDenied.errno, name="44-broker"),
    Case(45, 0, lambda c: A.AlterPartitionReassignmentsRequest(timeout_ms=10000, topics=[
        A.AlterPartitionReassignmentsRequest.ReassignableTopic(name=T, partitions=[
            A.AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
                partition_index=0, replicas=[1])])]), [cluster(Op.ALTER)], ClusterDenied.errno),
    Case(46, 0, lambda c: A.ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None),
         [cluster(Op.DESCRIBE)], ClusterDenied.errno),
    Case(47, 0, lambda c: OffsetDeleteRequest(group_id=G, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=T, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                partition_index=0)])]), [group(Op.DELETE), topic(Op.READ)], GroupDenied.errno,
        half=[group(Op.DELETE)], half_code=TopicDenied.errno),
    Case(50, 0, lambda c: scram_admin.describe_request(None), [cluster(Op.DESCRIBE)],
         ClusterDenied.errno),
    Case(51, 0, lambda c: scram_admin.alter_request([("carol", "SCRAM-SHA-256", "pw", 4096)], []),
         [cluster(Op.ALTER)], ClusterDenied.errno),
    Case(55, 2, lambda c: A.DescribeQuorumRequest(topics=[
        A.DescribeQuorumRequest.TopicData(topic_name="__cluster_metadata", partitions=[
            A.DescribeQuorumRequest.TopicData.PartitionData(partition_index=0)])]),
        [cluster(Op.DESCRIBE)], ClusterDenied.errno),
    Case(60, 1, lambda c: A.DescribeClusterRequest(include_cluster_authorized_operations=True,
                                                   endpoint_type=1), [], 0),
    Case(61, 0, lambda c: A.DescribeProducersRequest(topics=[
        A.DescribeProducersRequest.TopicRequest(name=T, partition_indexes=[0])]),
        [topic(Op.READ)], TopicDenied.errno),
    Case(65, 0, lambda c: A.DescribeTransactionsRequest(transactional_ids=[X]),
         [txn(Op.DESCRIBE)], TxnDenied.errno),
    Case(66, 0, lambda c: A.ListTransactionsRequest(state_filters=[], producer_id_filters=[]),
         [], 0),
    Case(68, 0, lambda c: _cg_heartbeat(), [group(Op.READ), topic(Op.DESCRIBE)],
         GroupDenied.errno, half=[group(Op.READ)], half_code=TopicDenied.errno),
    Case(69, 0, lambda c: M.ConsumerGroupDescribeRequest(group_ids=[G],
                                                         include_authorized_operations=False),
         [group(Op.DESCRIBE)], GroupDenied.errno),
    Case(75, 0, lambda c: A.DescribeTopicPartitionsRequest(
        topics=[A.DescribeTopicPartitionsRequest.TopicRequest(name=T)],
        response_partition_limit=100, cursor=None), [topic(Op.DESCRIBE)], TopicDenied.errno),
    Case(1000, 0, lambda c: M.ConsumerGroupPositionRequest(group_id=G, generation_id=1,
                                                           member_id="m", topics=[]),
         [group(Op.READ)], GroupDenied.errno),
    Case(1001, 0, lambda c: M.PartitionLeaderEpochsForPartitionsRequest(topics=[
        M.PartitionLeaderEpochsForPartitionsRequest.PartitionLeaderEpochsForPartitionsRequestTopic(
            topic=T, partitions=[0])]), [topic(Op.DESCRIBE)], TopicDenied.errno),
    Case(1002, 0, lambda c: M.AssignPartitionsRequest(assignments=[
        M.AssignPartitionsRequest.PartitionAssignment(topic=T, partition=0, brokers=[1])]),
        [cluster(Op.ALTER)], ClusterDenied.errno),
    Case(1003, 0, lambda c: M.PartitionAssignmentStatusRequest(request_id=-1),
         [cluster(Op.DESCRIBE)], ClusterDenied.errno),
    Case(1004, 0, lambda c: M.FaultControlRequest(command="error", broker_id=1, api_key=0,
                                                  errors=["NOT_LEADER_OR_FOLLOWER"], count=1),
         [cluster(Op.ALTER)], ClusterDenied.errno),
]


# Authentication itself: served before any principal exists (network/sasl.py), no ACL applies.
UNAUTHORIZED_KEYS = {17, 36}


def test_every_served_api_has_a_case():
    assert {c.key for c in CASES} == set(dispatch.HANDLERS) - UNAUTHORIZED_KEYS


def codes(resp) -> list[int]:
    """Every *error_code in a decoded response, depth first."""
    out = []
    if isinstance(resp, list):
        for x in resp:
            out += codes(x)
        return out
    if not hasattr(resp, "_struct"):
        return out
    for f in resp._struct._fields:
        v = getattr(resp, f.name, None)
        if f.name.endswith("error_code") and isinstance(v, int):
            out.append(v)
        elif isinstance(v, list) or hasattr(v, "_struct"):
            out += codes(v)
    return out


def state(c: Cluster) -> tuple:
    b = c.brokers[1]
    rm = b.replica_manager
    logs = []
    for name in sorted(b.metadata.topics):
        for p in sorted(b.metadata.topics[name].partitions):
            if rm.get(name, p) is not None:
                logs.append((name, p, rm.log_range(name, p)))
    return (len(c.metadata_log), logs,
            sorted(b.groups.classic.list_groups(None, None)[1]),
            sorted(b.groups.consumer.list_groups(None, None)),
            sorted((t.transactional_id, t.state_name) for t in b.txn.list_transactions()),
            sorted((x.node_id, x.host, x.port) for x in b.metadata.alive_brokers()),
            {n: dict(t.configs) for n, t in b.metadata.topics.items()},
            b.faults.armed, len(b.authorizer.acls))


def connect(c: Cluster, principal: str, control: bool):
    b = c.brokers[1]
    conns: dict = {}
    client = memory.connect(b.control_handle if control else b.handle, connections=conns)
    memory.server_of(client).principal = KafkaPrincipal.parse(principal)
    return client


async def call(c: Cluster, case: Case, principal: str):
    conn = connect(c, principal, case.control)
    try:
        return await conn.request(case.build(c), case.version, timeout=30)
    finally:
        conn.close()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
async def test_authorization(case: Case):
    async with Cluster(brokers=1, authorizer_class_name=STANDARD, super_users="User:admin",
                       offsets_topic_replication_factor=1, offsets_topic_num_partitions=1,
                       transaction_state_log_replication_factor=1,
                       transaction_state_log_num_partitions=1, transaction_state_log_min_isr=1,
                       group_initial_rebalance_delay_ms=0) as c:
        c.enable_fault_admin()
        await c.create_topic(T, 1, 1)
        admin = connect(c, "User:admin", False)
        await admin.request(produce_request(T, 0, batch([b"a", b"b"], 0)), 9)
        for key, key_type in ((G, 0), (X, 1)):     # the coordinators' topics exist
            for _ in range(100):
                r = await admin.request(FindCoordinatorRequest(key=key, key_type=key_type), 3)
                if r.error_code == 0:
                    break
                await asyncio.sleep(0.02)
        grants = [allow("User:granted", op, rt, name) for op, rt, name in case.needs] + \
                 [allow("User:half", op, rt, name) for op, rt, name in case.half]
        if grants:
            await c.channel.create_acls(grants)
            await c.wait_for_leaders(T)
            for _ in range(100):
                if len(c.brokers[1].authorizer.acls) == len(grants):
                    break
                await asyncio.sleep(0.01)
        callers = [("User:nobody", case.code, False)]
        if case.half:
            callers.append(("User:half", case.half_code, case.half_writes))
        for principal, code, writes in callers:
            before = state(c)
            resp = await call(c, case, principal)
            found = codes(resp)
            if code:
                assert code in found, (principal, resp)
                assert set(found) & AUTH_ERRORS == {code}, (principal, resp)
            else:
                assert not set(found) & AUTH_ERRORS, (principal, resp)
            if code and not writes:
                assert state(c) == before, principal
        for principal in ("User:granted", "User:admin"):
            resp = await call(c, case, principal)
            assert not set(codes(resp)) & AUTH_ERRORS, (principal, resp)
