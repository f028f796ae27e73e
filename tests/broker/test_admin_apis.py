"""Admin APIs against an in-process cluster: CreateTopics, DeleteTopics, DeleteRecords,
OffsetForLeaderEpoch, DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, CreatePartitions,
DescribeCluster, DescribeLogDirs — whole responses over the wire, then once through kafka-python's
KafkaAdminClient."""
from __future__ import annotations

import asyncio
import uuid

import pytest
from kafka.errors import (FencedLeaderEpochError, InvalidConfigurationError,
                          InvalidPartitionsError, InvalidReplicationFactorError,
                          InvalidRequestError, InvalidTopicError, MismatchedEndpointTypeError,
                          NotLeaderForPartitionError, OffsetOutOfRangeError, PolicyViolationError,
                          TopicAlreadyExistsError, UnknownLeaderEpochError, UnknownTopicIdError,
                          UnknownTopicOrPartitionError)
from kafka.protocol.admin import (AlterConfigsRequest, AlterConfigsResponse,
                                  CreatePartitionsRequest,
                                  CreatePartitionsResponse, CreateTopicsRequest,
                                  CreateTopicsResponse, DeleteRecordsRequest, DeleteRecordsResponse,
                                  DeleteTopicsRequest, DeleteTopicsResponse, DescribeClusterRequest,
                                  DescribeClusterResponse, DescribeConfigsRequest,
                                  DescribeConfigsResponse, DescribeLogDirsRequest,
                                  DescribeLogDirsResponse, IncrementalAlterConfigsRequest,
                                  IncrementalAlterConfigsResponse)
from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafka.protocol.producer import ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from minibroker.cluster import Cluster
from minibroker.log.config import DEFAULTS
from minibroker.network.client import KafkaClientConnection

pytestmark = pytest.mark.timeout(30)

CT = CreateTopicsRequest
CTR = CreateTopicsResponse.CreatableTopicResult
CTC = CTR.CreatableTopicConfigs
DT = DeleteTopicsResponse.DeletableTopicResult
DR_T = DeleteRecordsResponse.DeleteRecordsTopicResult
DR_P = DR_T.DeleteRecordsPartitionResult
OE_T = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
OE_P = OE_T.EpochEndOffset
OE_RT = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
OE_RP = OE_RT.OffsetForLeaderPartition
DC_R = DescribeConfigsResponse.DescribeConfigsResult
DC_E = DC_R.DescribeConfigsResourceResult
DC_S = DC_E.DescribeConfigsSynonym
AC = AlterConfigsRequest.AlterConfigsResource
AC_C = AC.AlterableConfig
AC_R = AlterConfigsResponse.AlterConfigsResourceResponse
IAC = IncrementalAlterConfigsRequest.AlterConfigsResource
IAC_C = IAC.AlterableConfig
IAC_R = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
CP = CreatePartitionsRequest.CreatePartitionsTopic
CP_R = CreatePartitionsResponse.CreatePartitionsTopicResult
ZERO = uuid.UUID(int=0)
TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def diff(a, b, path="resp"):
    """The first difference between two decoded messages, for readable assertion failures."""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)} items: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = diff(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    if hasattr(a, "_struct") and hasattr(b, "_struct"):
        for f in a._struct._fields:
            d = diff(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def check(resp, expected) -> None:
    assert resp == expected, diff(resp, expected)


def cluster():
    return Cluster(brokers=3, group_initial_rebalance_delay_ms=0)


async def connect(c: Cluster, broker_id: int = 1) -> KafkaClientConnection:
    b = c.brokers[broker_id]
    return await KafkaClientConnection.connect(b.host, b.port)


def topic(name, partitions=1, rf=1, configs=None, assignments=None):
    return CT.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CT.CreatableTopic.CreatableReplicaAssignment(partition_index=p, broker_ids=b)
                     for p, b in (assignments or {}).items()],
        configs=[CT.CreatableTopic.CreatableTopicConfig(name=k, value=v)
                 for k, v in (configs or {}).items()])


def all_configs(set_configs=None):
    set_configs = set_configs or {}
    return [CTC(name=n, value=set_configs.get(n, DEFAULTS[n]), read_only=False,
                config_source=1 if n in set_configs else 5, is_sensitive=False)
            for n in sorted(DEFAULTS)]


def err(name, code, message):
    return CTR(name=name, topic_id=None, error_code=code, error_message=message,
               topic_config_error_code=0, num_partitions=-1, replication_factor=-1, configs=[])


async def produce(c: Cluster, name: str, partition: int, n: int) -> None:
    leader = await c.leader_of(name, partition)
    conn = await connect(c, leader)
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for i in range(n):
        b.append(timestamp=1000 + i, key=None, value=b"v%d" % i)
    b.close()
    pd = ProduceRequest.TopicProduceData.PartitionProduceData(index=partition,
                                                              records=b.buffer())
    resp = await conn.request(ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=name, partition_data=[pd])]), 9)
    conn.close()
    assert resp.responses[0].partition_responses[0].error_code == 0


# ---------------------------------------------------------------------------- CreateTopics
async def test_create_topics_v7_returns_counts_configs_and_waits_for_leaders():
    async with cluster() as c:
        conn = await connect(c, 2)
        resp = await conn.request(CT(topics=[topic("a", 3, 2, {"retention.ms": "1000"})],
                                     timeout_ms=5000, validate_only=False), 7)
        [r] = resp.topics
        t = c.brokers[2].metadata.topics["a"]
        assert r == CTR(name="a", topic_id=t.topic_id, error_code=0, error_message=None,
                        topic_config_error_code=0, num_partitions=3, replication_factor=2,
                        configs=all_configs({"retention.ms": "1000"}))
        assert all(p.leader >= 0 for p in t.partitions.values())     # visible on answer
        assert t.configs == {"retention.ms": "1000"}


async def test_create_topics_errors():
    async with cluster() as c:
        await c.create_topic("exists", 1, 1)
        conn = await connect(c)
        resp = await conn.request(CT(topics=[
            topic("exists"), topic("bad/name"), topic("zero", 0, 1), topic("rf0", 1, 0),
            topic("rf9", 1, 9), topic("cfg", 1, 1, {"retention.ms": "abc"}),
            topic("unknowncfg", 1, 1, {"no.such.config": "1"}),
            topic("dup"), topic("dup"),
            topic("manual", 2, -1, assignments={0: [1], 1: [2]})],
            timeout_ms=5000, validate_only=False), 7)
        check(resp, CreateTopicsResponse(version=7, throttle_time_ms=0, topics=[
            err("exists", TopicAlreadyExistsError.errno, "Topic 'exists' already exists."),
            err("bad/name", InvalidTopicError.errno,
                "Topic name \"bad/name\" is illegal, it contains a character other than ASCII "
                "alphanumerics, '.', '_' and '-'"),
            err("zero", InvalidPartitionsError.errno,
                "Number of partitions must be larger than 0."),
            err("rf0", InvalidReplicationFactorError.errno,
                "Replication factor must be larger than 0."),
            err("rf9", InvalidReplicationFactorError.errno,
                "Replication factor: 9 larger than available brokers: 3."),
            err("cfg", InvalidConfigurationError.errno,
                "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
            err("unknowncfg", InvalidConfigurationError.errno,
                "Unknown topic config name: no.such.config"),
            err("dup", InvalidRequestError.errno, "Duplicate topic name."),
            err("manual", InvalidPartitionsError.errno,
                "A manual partition assignment was specified, but numPartitions was not set "
                "to -1."),
        ]))
        assert set(c.brokers[1].metadata.topics) == {"exists"}


async def test_create_topics_validate_only_assignments_and_old_versions():
    async with cluster() as c:
        conn = await connect(c)
        resp = await conn.request(CT(topics=[topic("v", 2, 3)], timeout_ms=5000,
                                     validate_only=True), 5)
        [r] = resp.topics
        assert (r.error_code, r.error_message, r.num_partitions, r.replication_factor,
                r.configs) == (0, None, 2, 3, all_configs())
        await asyncio.sleep(0.05)
        assert "v" not in c.brokers[1].metadata.topics
        # manual assignment, v4 (no counts/configs in the response)
        manual = topic("m", -1, -1, assignments={0: [3, 1], 1: [2, 3]})
        resp = await conn.request(CT(topics=[manual],
                                     timeout_ms=5000, validate_only=False), 4)
        check(resp, CreateTopicsResponse(version=4, throttle_time_ms=0, topics=[
            CTR(name="m", topic_id=None, error_code=0, error_message=None,
                topic_config_error_code=0, num_partitions=-1, replication_factor=-1, configs=[])]))
        t = c.brokers[1].metadata.topics["m"]
        assert {p: i.replicas for p, i in t.partitions.items()} == {0: (3, 1), 1: (2, 3)}
        # v0: no error message on the wire
        resp = await conn.request(CT(topics=[topic("m")], timeout_ms=0), 0)
        assert [(r.name, r.error_code) for r in resp.topics] == [
            ("m", TopicAlreadyExistsError.errno)]


# ---------------------------------------------------------------------------- DeleteTopics
async def test_delete_topics_by_name_and_id():
    async with cluster() as c:
        await c.create_topic("a", 2, 2)
        await c.create_topic("b", 1, 3)
        conn = await connect(c, 3)
        resp = await conn.request(DeleteTopicsRequest(topic_names=["a", "nope", "x", "x"],
                                                      timeout_ms=5000), 5)
        check(resp, DeleteTopicsResponse(version=5, throttle_time_ms=0, responses=[
            DT(name="a", topic_id=None, error_code=0, error_message=None),
            DT(name="nope", topic_id=None, error_code=UnknownTopicOrPartitionError.errno,
               error_message="This server does not host this topic-partition."),
            DT(name="x", topic_id=None, error_code=InvalidRequestError.errno,
               error_message="Duplicate topic name."),
        ]))
        assert "a" not in c.brokers[3].metadata.topics          # gone before the answer
        b_id = c.brokers[3].metadata.topics["b"].topic_id
        missing = uuid.UUID(int=12345)
        S = DeleteTopicsRequest.DeleteTopicState
        resp = await conn.request(DeleteTopicsRequest(topics=[
            S(name=None, topic_id=b_id), S(name=None, topic_id=missing),
            S(name="b", topic_id=b_id), S(name=None, topic_id=ZERO)], timeout_ms=5000), 6)
        check(resp, DeleteTopicsResponse(version=6, throttle_time_ms=0, responses=[
            DT(name="b", topic_id=b_id, error_code=0, error_message=None),
            DT(name=None, topic_id=missing, error_code=UnknownTopicIdError.errno,
               error_message="This server does not host this topic ID."),
            DT(name="b", topic_id=b_id, error_code=InvalidRequestError.errno,
               error_message="You may not specify both topic name and topic id."),
            DT(name=None, topic_id=None, error_code=InvalidRequestError.errno,
               error_message="Neither topic name nor id were specified."),
        ]))
        assert c.brokers[3].metadata.topics == {}
        for b in c.brokers.values():
            assert b.replica_manager.get("b", 0) is None or not b.running


# ---------------------------------------------------------------------------- DeleteRecords
async def test_delete_records():
    async with cluster() as c:
        await c.create_topic("d", 2, 3)
        await c.create_topic("compacted", 1, 1, {"cleanup.policy": "compact"})
        await produce(c, "d", 0, 10)
        leader = await c.leader_of("d", 0)
        other = next(b for b in c.brokers if b != leader)
        conn = await connect(c, leader)
        P = DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition

        def req(name, *parts):
            return DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(
                name=name, partitions=[P(partition_index=p, offset=o) for p, o in parts])],
                timeout_ms=5000)

        resp = await conn.request(req("d", (0, 4)), 2)
        check(resp, DeleteRecordsResponse(version=2, throttle_time_ms=0, topics=[
            DR_T(name="d", partitions=[DR_P(partition_index=0, low_watermark=4, error_code=0)])]))
        resp = await conn.request(req("d", (0, 11), (0, -7), (0, 2)), 1)
        assert resp.topics[0].partitions == [
            DR_P(partition_index=0, low_watermark=-1, error_code=OffsetOutOfRangeError.errno),
            DR_P(partition_index=0, low_watermark=-1, error_code=OffsetOutOfRangeError.errno),
            DR_P(partition_index=0, low_watermark=4, error_code=0)]      # never moves back
        resp = await conn.request(req("d", (0, -1)), 0)                  # -1: high watermark
        assert resp.topics[0].partitions == [
            DR_P(partition_index=0, low_watermark=10, error_code=0)]
        resp = await conn.request(req("nope", (0, 1)), 2)
        assert resp.topics[0].partitions == [DR_P(
            partition_index=0, low_watermark=-1, error_code=UnknownTopicOrPartitionError.errno)]
        conn2 = await connect(c, other)
        resp = await conn2.request(req("d", (0, 1)), 2)
        assert resp.topics[0].partitions == [DR_P(
            partition_index=0, low_watermark=-1, error_code=NotLeaderForPartitionError.errno)]
        cl = await c.leader_of("compacted", 0)
        conn3 = await connect(c, cl)
        resp = await conn3.request(req("compacted", (0, 0)), 2)
        assert resp.topics[0].partitions == [DR_P(
            partition_index=0, low_watermark=-1, error_code=PolicyViolationError.errno)]
        # followers follow the leader's log start offset through fetch
        for _ in range(200):
            starts = {bid: s["log_start_offset"]
                      for bid, s in (await c.partition_state("d", 0))["logs"].items()}
            if set(starts.values()) == {10}:
                break
            await asyncio.sleep(0.02)
        assert set(starts.values()) == {10}, starts


# ---------------------------------------------------------------------------- OffsetForLeaderEpoch
async def test_offset_for_leader_epoch():
    async with cluster() as c:
        await c.create_topic("e", 1, 3)
        await produce(c, "e", 0, 5)
        old = await c.leader_of("e", 0)
        reg = await c.active_controller()
        new = next(r for r in reg.partition("e", 0).isr if r != old)
        await c.move_leader("e", 0, new)
        for _ in range(200):
            p = c.brokers[new].replica_manager.get("e", 0)
            if p.is_leader and p.leader_epoch == 1:
                break
            await asyncio.sleep(0.01)
        await produce(c, "e", 0, 3)
        conn = await connect(c, new)

        def req(*parts, replica_id=-1):
            return OffsetForLeaderEpochRequest(replica_id=replica_id, topics=[OE_RT(
                topic="e", partitions=[OE_RP(partition=0, current_leader_epoch=cur,
                                             leader_epoch=e) for cur, e in parts])])

        resp = await conn.request(req((1, 0), (1, 1), (-1, 7), (0, 0), (2, 0)), 4)
        check(resp, OffsetForLeaderEpochResponse(version=4, throttle_time_ms=0, topics=[OE_T(
            topic="e", partitions=[
                OE_P(error_code=0, partition=0, leader_epoch=0, end_offset=5),
                OE_P(error_code=0, partition=0, leader_epoch=1, end_offset=8),
                OE_P(error_code=0, partition=0, leader_epoch=-1, end_offset=-1),
                OE_P(error_code=FencedLeaderEpochError.errno, partition=0, leader_epoch=-1,
                     end_offset=-1),
                OE_P(error_code=UnknownLeaderEpochError.errno, partition=0, leader_epoch=-1,
                     end_offset=-1)])]))
        # a follower asking as a follower (v3 replica_id) at v2/v3
        resp = await conn.request(req((1, 0), replica_id=old), 3)
        assert resp.topics[0].partitions == [
            OE_P(error_code=0, partition=0, leader_epoch=0, end_offset=5)]
        # not the leader: NOT_LEADER for clients, answered by any replica for -2 (debugging)
        conn_old = await connect(c, old)
        resp = await conn_old.request(req((-1, 0)), 2)
        assert resp.topics[0].partitions == [OE_P(
            error_code=NotLeaderForPartitionError.errno, partition=0, leader_epoch=-1,
            end_offset=-1)]
        resp = await conn_old.request(req((-1, 0), replica_id=-2), 3)
        assert resp.topics[0].partitions == [
            OE_P(error_code=0, partition=0, leader_epoch=0, end_offset=5)]
        resp = await conn.request(OffsetForLeaderEpochRequest(replica_id=-1, topics=[OE_RT(
            topic="nope", partitions=[OE_RP(partition=0, current_leader_epoch=-1,
                                            leader_epoch=0)])]), 4)
        assert resp.topics[0].partitions == [OE_P(
            error_code=UnknownTopicOrPartitionError.errno, partition=0, leader_epoch=-1,
            end_offset=-1)]


# ---------------------------------------------------------------------------- DescribeConfigs
def dc_entry(name, value, source, synonyms=(), config_type=0, read_only=False):
    return DC_E(name=name, value=value, read_only=read_only, config_source=source,
                is_default=False, is_sensitive=False, synonyms=list(synonyms),  # v0 only
                config_type=config_type, documentation=None)


async def test_describe_configs_topic_and_broker():
    async with cluster() as c:
        await c.create_topic("t", 1, 1, {"retention.ms": "5000", "cleanup.policy": "compact"})
        conn = await connect(c, 2)
        R = DescribeConfigsRequest.DescribeConfigsResource
        resp = await conn.request(DescribeConfigsRequest(resources=[
            R(resource_type=TOPIC, resource_name="t",
              configuration_keys=["retention.ms", "segment.bytes", "no.such"]),
            R(resource_type=TOPIC, resource_name="nope", configuration_keys=None),
            R(resource_type=TOPIC, resource_name="", configuration_keys=None),
            R(resource_type=BROKER, resource_name="7", configuration_keys=None),
            R(resource_type=BROKER, resource_name="2", configuration_keys=["num.partitions"]),
            R(resource_type=9, resource_name="x", configuration_keys=None),
        ], include_synonyms=True, include_documentation=False), 4)
        check(resp, DescribeConfigsResponse(version=4, throttle_time_ms=0, results=[
            DC_R(error_code=0, error_message=None, resource_type=TOPIC, resource_name="t",
                 configs=[
                     dc_entry("retention.ms", "5000", 1, config_type=5, synonyms=[
                         DC_S(name="retention.ms", value="5000", source=1),
                         DC_S(name="log.retention.ms", value="604800000", source=5)]),
                     dc_entry("segment.bytes", "1073741824", 5, config_type=3, synonyms=[
                         DC_S(name="log.segment.bytes", value="1073741824", source=5)])]),
            DC_R(error_code=UnknownTopicOrPartitionError.errno,
                 error_message="The topic 'nope' does not exist.", resource_type=TOPIC,
                 resource_name="nope", configs=[]),
            DC_R(error_code=InvalidTopicError.errno,
                 error_message="Topic name is illegal, it can't be empty", resource_type=TOPIC,
                 resource_name="", configs=[]),
            DC_R(error_code=InvalidRequestError.errno,
                 error_message="Unexpected broker id, expected 2 or empty string, but received 7",
                 resource_type=BROKER, resource_name="7", configs=[]),
            DC_R(error_code=0, error_message=None, resource_type=BROKER, resource_name="2",
                 configs=[dc_entry("num.partitions", "1", 5, read_only=True, synonyms=[
                     DC_S(name="num.partitions", value="1", source=5)])]),
            DC_R(error_code=InvalidRequestError.errno,
                 error_message="Unsupported resource type: 9", resource_type=9,
                 resource_name="x", configs=[]),
        ]))
        # v0 (is_default, no synonyms) and every config
        resp = await conn.request(DescribeConfigsRequest(resources=[
            R(resource_type=TOPIC, resource_name="t", configuration_keys=None)]), 0)
        got = {e.name: (e.value, e.is_default, e.read_only) for e in resp.results[0].configs}
        want = {n: (v, True, False) for n, v in DEFAULTS.items()}
        want["retention.ms"] = ("5000", False, False)
        want["cleanup.policy"] = ("compact", False, False)
        assert got == want
        # broker overrides show as STATIC_BROKER_CONFIG
        resp = await conn.request(DescribeConfigsRequest(resources=[
            R(resource_type=BROKER, resource_name="", configuration_keys=[
                "group.initial.rebalance.delay.ms"])]), 1)
        assert resp.results[0].configs == [DC_E(
            name="group.initial.rebalance.delay.ms", value="0", read_only=True, config_source=4,
            is_default=False, is_sensitive=False, synonyms=[], config_type=0,
            documentation="")]          # v1 has no documentation: decodes as the default ""


# ---------------------------------------------------------------------------- AlterConfigs
async def describe_topic(conn, name) -> dict[str, str]:
    R = DescribeConfigsRequest.DescribeConfigsResource
    resp = await conn.request(DescribeConfigsRequest(resources=[
        R(resource_type=TOPIC, resource_name=name, configuration_keys=None)]), 4)
    return {e.name: e.value for e in resp.results[0].configs if e.config_source == 1}


async def test_alter_configs_replaces_the_whole_set():
    async with cluster() as c:
        await c.create_topic("t", 1, 1, {"retention.ms": "5000", "cleanup.policy": "compact"})
        conn = await connect(c)

        def res(name, *configs):
            return AC(resource_type=TOPIC, resource_name=name,
                      configs=[AC_C(name=k, value=v) for k, v in configs])

        resp = await conn.request(AlterConfigsRequest(resources=[
            res("t", ("retention.bytes", "100"), ("segment.bytes", "2048"))],
            validate_only=False), 2)
        check(resp, AlterConfigsResponse(version=2, throttle_time_ms=0, responses=[
            AC_R(error_code=0, error_message=None, resource_type=TOPIC, resource_name="t")]))
        assert await describe_topic(conn, "t") == {"retention.bytes": "100",
                                                   "segment.bytes": "2048"}
        assert c.brokers[1].metadata.topics["t"].configs == {"retention.bytes": "100",
                                                             "segment.bytes": "2048"}
        resp = await conn.request(AlterConfigsRequest(resources=[
            res("t", ("retention.ms", "x")), res("t2", ("retention.ms", "1")),
            res("t2", ("retention.ms", "2")), res("nope", ("retention.ms", "1")),
            res("t3", ("bogus.config", "1")), res("bad name", ("retention.ms", "1")),
            AC(resource_type=BROKER, resource_name="1",
               configs=[AC_C(name="num.partitions", value="3")])],
            validate_only=False), 0)
        check(resp, AlterConfigsResponse(version=0, throttle_time_ms=0, responses=[
            AC_R(error_code=InvalidConfigurationError.errno,
                 error_message="Invalid value x for configuration retention.ms: Not a number of "
                               "type LONG", resource_type=TOPIC, resource_name="t"),
            AC_R(error_code=InvalidRequestError.errno, error_message="Duplicate resource.",
                 resource_type=TOPIC, resource_name="t2"),
            AC_R(error_code=UnknownTopicOrPartitionError.errno,
                 error_message="Topic nope does not exist", resource_type=TOPIC,
                 resource_name="nope"),
            AC_R(error_code=UnknownTopicOrPartitionError.errno,
                 error_message="Topic t3 does not exist", resource_type=TOPIC,
                 resource_name="t3"),
            AC_R(error_code=InvalidTopicError.errno,
                 error_message="Topic name \"bad name\" is illegal, it contains a character "
                               "other than ASCII alphanumerics, '.', '_' and '-'",
                 resource_type=TOPIC, resource_name="bad name"),
            AC_R(error_code=InvalidRequestError.errno,
                 error_message="Cannot update these configs dynamically: Set(num.partitions)",
                 resource_type=BROKER, resource_name="1"),
        ]))
        resp = await conn.request(AlterConfigsRequest(resources=[
            res("t", ("bogus.config", "1"))], validate_only=False), 1)
        assert resp.responses == [AC_R(
            error_code=InvalidConfigurationError.errno,
            error_message="Unknown topic config name: bogus.config", resource_type=TOPIC,
            resource_name="t")]
        resp = await conn.request(AlterConfigsRequest(resources=[res("t")], validate_only=True), 1)
        assert resp.responses[0].error_code == 0
        assert await describe_topic(conn, "t") == {"retention.bytes": "100",
                                                   "segment.bytes": "2048"}


async def test_incremental_alter_configs():
    async with cluster() as c:
        await c.create_topic("t", 1, 2, {"retention.ms": "5000", "segment.bytes": "4096"})
        conn = await connect(c, 3)

        def res(name, *ops):
            return IAC(resource_type=TOPIC, resource_name=name,
                       configs=[IAC_C(name=k, config_operation=o, value=v) for k, o, v in ops])

        resp = await conn.request(IncrementalAlterConfigsRequest(resources=[res(
            "t", ("retention.ms", SET, "7000"), ("segment.bytes", DELETE, None),
            ("cleanup.policy", APPEND, "compact"))], validate_only=False), 1)
        check(resp, IncrementalAlterConfigsResponse(version=1, throttle_time_ms=0, responses=[
            IAC_R(error_code=0, error_message=None, resource_type=TOPIC, resource_name="t")]))
        assert await describe_topic(conn, "t") == {"retention.ms": "7000",
                                                   "cleanup.policy": "delete,compact"}
        resp = await conn.request(IncrementalAlterConfigsRequest(resources=[res(
            "t", ("cleanup.policy", SUBTRACT, "delete"))], validate_only=False), 0)
        assert resp.responses[0].error_code == 0
        assert await describe_topic(conn, "t") == {"retention.ms": "7000",
                                                   "cleanup.policy": "compact"}
        # the leader's log config follows
        leader = await c.leader_of("t", 0)
        assert c.brokers[leader].replica_manager.get("t", 0).log.config.cleanup_policy == "compact"
        resp = await conn.request(IncrementalAlterConfigsRequest(resources=[
            res("t", ("retention.ms", APPEND, "1")),
            res("t2", ("retention.ms", SET, "1"), ("retention.ms", DELETE, None)),
            res("t3", ("retention.ms", SET, None)),
            res("t4", ("retention.ms", 9, "1")),
            res("nope", ("retention.ms", SET, "1")),
            # Only the replication throttle rates are dynamic broker configs.
            IAC(resource_type=BROKER, resource_name="3", configs=[
                IAC_C(name="num.partitions", config_operation=SET, value="3")]),
        ], validate_only=False), 1)
        check(resp, IncrementalAlterConfigsResponse(version=1, throttle_time_ms=0, responses=[
            IAC_R(error_code=InvalidConfigurationError.errno,
                  error_message="Can't APPEND to key retention.ms because its type is not LIST.",
                  resource_type=TOPIC, resource_name="t"),
            IAC_R(error_code=InvalidRequestError.errno,
                  error_message="Error due to duplicate config keys", resource_type=TOPIC,
                  resource_name="t2"),
            IAC_R(error_code=InvalidRequestError.errno,
                  error_message="Null value not supported for : retention.ms",
                  resource_type=TOPIC, resource_name="t3"),
            IAC_R(error_code=InvalidRequestError.errno,
                  error_message="Unknown alter config operation type 9", resource_type=TOPIC,
                  resource_name="t4"),
            IAC_R(error_code=UnknownTopicOrPartitionError.errno,
                  error_message="Topic nope does not exist", resource_type=TOPIC,
                  resource_name="nope"),
            IAC_R(error_code=InvalidRequestError.errno,
                  error_message="Cannot update these configs dynamically: Set(num.partitions)",
                  resource_type=BROKER, resource_name="3"),
        ]))
        resp = await conn.request(IncrementalAlterConfigsRequest(resources=[res(
            "t", ("min.insync.replicas", SET, "0"))], validate_only=True), 1)
        assert resp.responses[0] == IAC_R(
            error_code=InvalidConfigurationError.errno,
            error_message="Invalid value 0 for configuration min.insync.replicas: Value must be "
                          "at least 1", resource_type=TOPIC, resource_name="t")
        resp = await conn.request(IncrementalAlterConfigsRequest(resources=[res(
            "t", ("min.insync.replicas", SET, "2"))], validate_only=True), 1)
        assert resp.responses[0].error_code == 0
        assert "min.insync.replicas" not in await describe_topic(conn, "t")


# ---------------------------------------------------------------------------- CreatePartitions
async def test_create_partitions():
    async with cluster() as c:
        await c.create_topic("p", 2, 2)
        conn = await connect(c, 2)
        resp = await conn.request(CreatePartitionsRequest(topics=[
            CP(name="p", count=4, assignments=None)], timeout_ms=5000, validate_only=False), 3)
        check(resp, CreatePartitionsResponse(version=3, throttle_time_ms=0, results=[
            CP_R(name="p", error_code=0, error_message=None)]))
        t = c.brokers[2].metadata.topics["p"]                 # visible on answer
        assert sorted(t.partitions) == [0, 1, 2, 3] and t.undeleted_partition_count == 4
        assert all(len(i.replicas) == 2 and i.leader >= 0 for i in t.partitions.values())
        A = CP.CreatePartitionsAssignment
        resp = await conn.request(CreatePartitionsRequest(topics=[
            CP(name="p", count=6, assignments=[A(broker_ids=[3, 1]), A(broker_ids=[1, 2])]),
            CP(name="nope", count=3, assignments=None),
            CP(name="dup", count=3, assignments=None), CP(name="dup", count=3, assignments=None),
        ], timeout_ms=5000, validate_only=False), 1)
        check(resp, CreatePartitionsResponse(version=1, throttle_time_ms=0, results=[
            CP_R(name="p", error_code=0, error_message=None),
            CP_R(name="nope", error_code=UnknownTopicOrPartitionError.errno,
                 error_message="Topic nope does not exist"),
            CP_R(name="dup", error_code=InvalidRequestError.errno,
                 error_message="Duplicate topic name."),
        ]))
        t = c.brokers[2].metadata.topics["p"]
        assert (t.partitions[4].replicas, t.partitions[5].replicas) == ((3, 1), (1, 2))
        resp = await conn.request(CreatePartitionsRequest(topics=[
            CP(name="p", count=6, assignments=None),
            CP(name="p2", count=9, assignments=None)], timeout_ms=5000, validate_only=True), 0)
        assert resp.results == [
            CP_R(name="p", error_code=InvalidPartitionsError.errno,
                 error_message="Topic already has 6 partitions."),
            CP_R(name="p2", error_code=UnknownTopicOrPartitionError.errno,
                 error_message="Topic p2 does not exist")]
        resp = await conn.request(CreatePartitionsRequest(topics=[
            CP(name="p", count=8, assignments=None)], timeout_ms=5000, validate_only=True), 2)
        assert resp.results == [CP_R(name="p", error_code=0, error_message=None)]
        await asyncio.sleep(0.05)
        assert len(c.brokers[2].metadata.topics["p"].partitions) == 6


# ---------------------------------------------------------------------------- DescribeCluster
async def test_describe_cluster():
    async with cluster() as c:
        conn = await connect(c, 3)
        B = DescribeClusterResponse.DescribeClusterBroker
        brokers = [B(broker_id=i, host=b.host, port=b.port, rack=None)
                   for i, b in sorted(c.brokers.items())]
        for version in (0, 1):
            resp = await conn.request(DescribeClusterRequest(
                include_cluster_authorized_operations=False, endpoint_type=1), version)
            check(resp, DescribeClusterResponse(version=version,
                throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
                cluster_id=c.cluster_id, controller_id=c.brokers[3].metadata.controller_id,
                brokers=brokers, authorized_operations=None))
        resp = await conn.request(DescribeClusterRequest(
            include_cluster_authorized_operations=False, endpoint_type=2), 1)
        assert (resp.error_code, resp.brokers) == (MismatchedEndpointTypeError.errno, [])


# ---------------------------------------------------------------------------- DescribeLogDirs
async def test_describe_log_dirs():
    async with cluster() as c:
        await c.create_topic("l", 2, 3)
        await produce(c, "l", 1, 4)
        conn = await connect(c, 1)
        R = DescribeLogDirsResponse.DescribeLogDirsResult
        T, P = R.DescribeLogDirsTopic, R.DescribeLogDirsTopic.DescribeLogDirsPartition
        size = c.brokers[1].replica_manager.get("l", 1).log.size_bytes
        for _ in range(100):        # the follower may still be fetching
            size = c.brokers[1].replica_manager.get("l", 1).log.size_bytes
            if size:
                break
            await asyncio.sleep(0.02)
        assert size > 0
        resp = await conn.request(DescribeLogDirsRequest(topics=None), 4)
        check(resp, DescribeLogDirsResponse(version=4, throttle_time_ms=0, error_code=0, results=[R(
            error_code=0, log_dir="/minibroker/data", total_bytes=-1, usable_bytes=-1,
            topics=[T(name="l", partitions=[
                P(partition_index=0, partition_size=0, offset_lag=0, is_future_key=False),
                P(partition_index=1, partition_size=size, offset_lag=0, is_future_key=False)])])]))
        DT_ = DescribeLogDirsRequest.DescribableLogDirTopic
        resp = await conn.request(DescribeLogDirsRequest(topics=[
            DT_(topic="l", partitions=[1, 7]), DT_(topic="nope", partitions=[0])]), 1)
        assert [(t.name, [p.partition_index for p in t.partitions])
                for t in resp.results[0].topics] == [("l", [1])]


# ---------------------------------------------------------------------------- a real client
def _admin_roundtrip(bootstrap: str) -> dict:
    from kafka.admin import (AlterConfigOp, ConfigResource, ConfigResourceType, KafkaAdminClient,
                             NewTopic)
    from kafka.structs import TopicPartition
    topic_k = ConfigResource(ConfigResourceType.TOPIC, "k")
    out = {}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        out["create"] = admin.create_topics(
            [NewTopic("k", 2, 2, topic_configs={"retention.ms": "9000"})])
        out["topics"] = sorted(admin.list_topics())
        out["create_partitions"] = admin.create_partitions({"k": 3})
        out["describe_cluster"] = admin.describe_cluster()
        out["describe_configs"] = admin.describe_configs([topic_k])
        out["alter"] = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "k", configs={"retention.ms": "8000"})],
            incremental=False)
        out["incremental"] = admin.alter_configs([ConfigResource(
            ConfigResourceType.TOPIC, "k",
            configs={"cleanup.policy": (AlterConfigOp.APPEND, "compact")})], incremental=True)
        out["after_alter"] = admin.describe_configs([topic_k])
        out["delete_records"] = admin.delete_records({TopicPartition("k", 0): 0})
        out["log_dirs"] = admin.describe_log_dirs()
        out["delete"] = admin.delete_topics(["k"])
        out["after_delete"] = sorted(admin.list_topics())
    finally:
        admin.close()
    return out


async def test_kafka_python_admin_client():
    async with cluster() as c:
        out = await asyncio.to_thread(_admin_roundtrip, c.bootstrap)
        [created] = out["create"]["topics"]
        assert (created["name"], created["error_code"], created["num_partitions"],
                created["replication_factor"]) == ("k", 0, 2, 2)
        assert created["configs"]["retention.ms"]["value"] == "9000"
        assert out["topics"] == ["k"]
        assert [r.error_code for r in out["create_partitions"].results] == [0]
        assert [b["broker_id"] for b in out["describe_cluster"]["brokers"]] == [1, 2, 3]
        assert out["describe_cluster"]["cluster_id"] == c.cluster_id
        retention = out["describe_configs"]["topic"]["k"]["retention.ms"]
        assert (retention["value"], retention["config_source"]) == ("9000",
                                                                   "DYNAMIC_TOPIC_CONFIG")
        assert out["alter"] == out["incremental"] == {"topic": {"k": "OK"}}
        after = out["after_alter"]["topic"]["k"]
        assert {n: e["value"] for n, e in after.items()} == {"retention.ms": "8000",
                                                             "cleanup.policy": "delete,compact"}
        assert [(tp.partition, r["low_watermark"], r["error_code"])
                for tp, r in out["delete_records"].items()] == [(0, 0, 0)]
        assert sorted(d["broker"] for d in out["log_dirs"]) == [1, 2, 3]
        assert sum(len(t["partitions"]) for d in out["log_dirs"] for ld in d["log_dirs"]
                   for t in ld["topics"]) == 6                      # 3 partitions x rf 2
        assert [(t["name"], t["error_code"]) for t in out["delete"]["topics"]] == [("k", 0)]
        assert out["after_delete"] == []
        assert c.brokers[1].metadata.topics == {}
