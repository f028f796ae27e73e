"""Round trips of every message in schemas/ at every version, and the promises about stock messages."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import MetadataResponse
from kafka.protocol.producer import ProduceRequest
from kafka.protocol.schemas.fields.codecs import (
    BitField, Boolean, Bytes, Float64, Int8, Int16, Int32, Int64, String, UnsignedInt16, UUID)

from minibroker.protocol import messages as m
from minibroker.protocol.errors import (
    INVALID_PARTITION_METADATA, PARTITION_REASSIGNMENT_IN_PROGRESS, InvalidPartitionMetadataError,
    PartitionReassignmentInProgressError, error_name, for_code)

from schema_samples import build


# --- a value for every field of a version, none of them the default --------------------------------

def _scalar(codec, n: int):
    if codec is Int8:
        return 7 + n % 50
    if codec is Int16:
        return 300 + n
    if codec is UnsignedInt16:
        return 40000 + n
    if codec is Int32:
        return 70000 + n
    if codec is Int64:
        return (1 << 40) + n
    if codec is Float64:
        return 0.5 + n
    if codec is Boolean:
        return True
    if codec is UUID:
        return uuid.UUID(int=(0xABC << 64) + n)
    if codec is Bytes:
        return bytes([n % 256, 1, 2])
    if codec is BitField:
        return {1, 3, n % 8 + 8}
    if isinstance(codec, String):
        return f"v{n}"
    raise AssertionError(codec)


def sample(cls, version: int):
    return build(cls, cls._struct, version, [0], _scalar, 3)


def versions(cls):
    return range(cls.min_version, cls.max_version + 1)


ALL = m.MESSAGE_CLASSES + m.EXTENDED_CLASSES
CASES = [pytest.param(cls, v, id=f"{cls.__name__}-v{v}") for cls in ALL for v in versions(cls)]


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_round_trip_every_version(cls, version):
    msg = sample(cls, version)
    encoded = msg.encode(version=version)
    decoded = cls.decode(encoded, version=version)
    assert decoded == msg
    assert msg.encode(version=version) == encoded


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_round_trip_with_header_and_frame(cls, version):
    msg = sample(cls, version)
    msg.with_header(correlation_id=42, client_id="minibroker-test")
    encoded = msg.encode(header=True, framed=True)  # msg already has its version
    decoded = cls.decode(encoded, version=version, header=True, framed=True)
    assert decoded == msg
    assert decoded.header.correlation_id == 42


def test_classes_and_keys():
    assert [(c.__name__, c.API_KEY) for c in m.MESSAGE_CLASSES[::2]] == [
        ("LeaderAndIsrRequest", 4), ("StopReplicaRequest", 5), ("UpdateMetadataRequest", 6),
        ("ConsumerGroupHeartbeatRequest", 68), ("ConsumerGroupDescribeRequest", 69),
        ("ConsumerGroupPositionRequest", 1000), ("PartitionLeaderEpochsForPartitionsRequest", 1001),
        ("AssignPartitionsRequest", 1002), ("PartitionAssignmentStatusRequest", 1003),
        ("FaultControlRequest", 1004)]
    for req, resp in zip(m.MESSAGE_CLASSES[::2], m.MESSAGE_CLASSES[1::2]):
        assert req.is_request() and not resp.is_request()
        assert req.API_KEY == resp.API_KEY and req.max_version == resp.max_version
    assert {c.__name__: c.max_version for c in m.MESSAGE_CLASSES[::2]} == {
        "LeaderAndIsrRequest": 7, "StopReplicaRequest": 4, "UpdateMetadataRequest": 8,
        "ConsumerGroupHeartbeatRequest": 1, "ConsumerGroupDescribeRequest": 1,
        "ConsumerGroupPositionRequest": 0, "PartitionLeaderEpochsForPartitionsRequest": 0,
        "AssignPartitionsRequest": 0, "PartitionAssignmentStatusRequest": 0,
        "FaultControlRequest": 0}
    assert [int(k) for k in m.PrivateApiKey] == [1000, 1001, 1002, 1003, 1004]
    for cls in m.MESSAGE_CLASSES[10:]:  # the seeds' new APIs are flexible from v0
        assert cls.flexible_version_q(0)


def test_consumer_group_heartbeat_v1_regex_only_in_v1():
    req = m.ConsumerGroupHeartbeatRequest(
        group_id="g", member_id="m", member_epoch=0, instance_id=None, rack_id=None,
        rebalance_timeout_ms=30000, subscribed_topic_names=None, subscribed_topic_regex="t.*",
        server_assignor=None, topic_partitions=None)
    v1 = m.ConsumerGroupHeartbeatRequest.decode(req.encode(version=1), version=1)
    v0 = m.ConsumerGroupHeartbeatRequest.decode(req.encode(version=0), version=0)
    assert v1.subscribed_topic_regex == "t.*"
    assert v0.subscribed_topic_regex is None
    assert len(req.encode(version=1)) == len(req.encode(version=0)) + len(b"\x04t.*")


def test_kip253_maps_travel_on_leader_and_isr_and_update_metadata():
    lt = m.LeaderAndIsrRequest.LeaderAndIsrTopicState
    lp = lt.LeaderAndIsrPartitionState
    part = lp(partition_index=5, controller_epoch=1, leader=2, leader_epoch=9, isr=[2], partition_epoch=4,
              replicas=[2], adding_replicas=[], removing_replicas=[], is_new=True, leader_recovery_state=0,
              leader_epoch_after_creation=[lp.PartitionLeaderEpochAfterCreation(partition_index=1, leader_epoch=8)],
              leader_epoch_before_deletion=[])
    req = m.LeaderAndIsrRequest(
        controller_id=3000, is_k_raft_controller=True, controller_epoch=1, broker_epoch=10, request_type=1,
        topic_states=[lt(topic_name="t", topic_id=uuid.UUID(int=1), partition_states=[part],
                         undeleted_partition_count=6, configs=[lt.TopicConfig(name="retention.ms", value="1")])],
        live_leaders=[])
    got = m.LeaderAndIsrRequest.decode(req.encode(version=7), version=7)
    assert got == req
    assert got.topic_states[0].undeleted_partition_count == 6
    assert got.topic_states[0].partition_states[0].leader_epoch_after_creation[0].leader_epoch == 8
    # the KIP-253 fields are tags: a v3 (non-flexible) request simply does not carry them
    old = m.LeaderAndIsrRequest.decode(req.encode(version=3), version=3)
    assert old.topic_states[0].undeleted_partition_count == -1

    um = m.UpdateMetadataRequest(controller_id=1, controller_epoch=1, broker_epoch=1, topic_states=[],
                                 live_brokers=[], max_partition_epoch=77, request_type=2)
    got = m.UpdateMetadataRequest.decode(um.encode(version=8), version=8)
    assert (got.max_partition_epoch, got.request_type) == (77, 2)
    assert m.UpdateMetadataRequest.is_request() and m.LeaderAndIsrRequest.is_request()


def test_partition_leader_epochs_response_carries_whole_maps():
    r = m.PartitionLeaderEpochsForPartitionsResponse
    t = r.PartitionLeaderEpochsForPartitionsResponseTopic
    p = t.PartitionLeaderEpochsForPartitionsResponsePartition
    after = [p.PartitionLeaderEpochAfterCreation(partition_index=i, leader_epoch=10 + i) for i in range(3)]
    resp = r(throttle_time_ms=0, error_code=0, topics=[t(topic="t", error_code=0, partitions=[
        p(partition=3, error_code=0, leader_epoch_after_creation=after, leader_epoch_before_deletion=[])])])
    got = r.decode(resp.encode(version=0), version=0)
    assert got == resp
    assert {(e.partition_index, e.leader_epoch) for e in got.topics[0].partitions[0].leader_epoch_after_creation} == {
        (0, 10), (1, 11), (2, 12)}


# --- extended stock messages -------------------------------------------------------------------

def _metadata_values(kind):
    """The same metadata, built from the classes of ``kind`` (stock or extended)."""
    topic = kind.MetadataResponseTopic
    part = topic.MetadataResponsePartition
    return kind(
        throttle_time_ms=5,
        brokers=[kind.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092, rack=None),
                 kind.MetadataResponseBroker(node_id=2, host="127.0.0.1", port=9093, rack="r2")],
        cluster_id="cluster", controller_id=1,
        topics=[topic(error_code=0, name="orders", topic_id=uuid.UUID(int=77), is_internal=False,
                      partitions=[part(error_code=0, partition_index=i, leader_id=1 + i % 2, leader_epoch=3,
                                       replica_nodes=[1, 2], isr_nodes=[1, 2], offline_replicas=[])
                                  for i in range(3)],
                      authorized_operations=None)],
        authorized_operations=None, error_code=0)


@pytest.mark.parametrize("version", range(0, 14))
def test_extended_metadata_without_tags_is_byte_identical(version):
    stock = _metadata_values(MetadataResponse).encode(version=version)
    ours = _metadata_values(m.MetadataResponseKip253).encode(version=version)
    assert ours == stock
    assert m.MetadataResponseKip253.decode(stock, version=version).topics[0].undeleted_partition_count == -1


@pytest.mark.parametrize("version", [12, 13])
def test_extended_metadata_tags_are_read_by_us_and_ignored_by_stock(version):
    msg = _metadata_values(m.MetadataResponseKip253)
    msg.max_partition_epoch = 12
    msg.topics[0].initial_partition_count = 2
    msg.topics[0].undeleted_partition_count = 3
    for p in msg.topics[0].partitions:
        p.partition_epoch = 4
    encoded = msg.encode(version=version)
    assert encoded != _metadata_values(MetadataResponse).encode(version=version)
    got = m.MetadataResponseKip253.decode(encoded, version=version)
    assert (got.max_partition_epoch, got.topics[0].initial_partition_count,
            got.topics[0].undeleted_partition_count) == (12, 2, 3)
    assert [p.partition_epoch for p in got.topics[0].partitions] == [4, 4, 4]
    stock = MetadataResponse.decode(encoded, version=version)
    assert stock.topics[0].name == "orders" and len(stock.topics[0].partitions) == 3
    assert stock.unknown_tags == {"_10000": (12).to_bytes(4, "big")}


def _produce(cls, **topic_tags):
    topic = cls.TopicProduceData
    return cls(transactional_id=None, acks=-1, timeout_ms=30000, topic_data=[
        topic(name="orders", partition_data=[topic.PartitionProduceData(index=0, records=b"\x00" * 61)],
              **topic_tags)])


def test_stock_produce_v9_decodes_as_kip253_with_unknown_count():
    encoded = _produce(ProduceRequest).encode(version=9)
    got = m.ProduceRequestKip253.decode(encoded, version=9)
    assert got.topic_data[0].undeleted_partition_count == -1
    assert got.topic_data[0].name == "orders"
    assert bytes(got.topic_data[0].partition_data[0].records) == b"\x00" * 61
    assert _produce(m.ProduceRequestKip253).encode(version=9) == encoded


def test_kip253_produce_tag_is_read_by_us_and_ignored_by_stock():
    encoded = _produce(m.ProduceRequestKip253, undeleted_partition_count=6).encode(version=9)
    assert m.ProduceRequestKip253.decode(encoded, version=9).topic_data[0].undeleted_partition_count == 6
    stock = ProduceRequest.decode(encoded, version=9)
    assert stock.topic_data[0].name == "orders"
    assert bytes(stock.topic_data[0].partition_data[0].records) == b"\x00" * 61
    assert stock.topic_data[0].unknown_tags == {"_10000": (6).to_bytes(4, "big")}
    # before v9 there are no tags: the count cannot travel and reads as unknown
    v8 = _produce(m.ProduceRequestKip253, undeleted_partition_count=6).encode(version=8)
    assert m.ProduceRequestKip253.decode(v8, version=8).topic_data[0].undeleted_partition_count == -1


def test_extended_requests_keep_stock_behaviour():
    assert issubclass(m.ProduceRequestKip253, ProduceRequest)
    assert issubclass(m.FetchRequestKip253, FetchRequest)
    acks0 = _produce(m.ProduceRequestKip253)
    acks0.acks = 0
    assert not acks0.expect_response()
    fetch = sample(m.FetchRequestKip253, 12)
    got = FetchRequest.decode(fetch.encode(version=12), version=12)
    assert got.topics[0].topic == fetch.topics[0].topic
    assert m.FetchRequestKip253.decode(fetch.encode(version=12), version=12) == fetch


def test_importing_messages_leaves_kafka_python_registry_alone():
    code = textwrap.dedent("""
        import warnings; warnings.simplefilter("ignore")
        from kafka.protocol.api_header import ResponseClassRegistry as R
        import kafka.protocol.producer, kafka.protocol.consumer, kafka.protocol.metadata
        before = {k: R._response_class_registry[k] for k in (0, 1, 3)}
        import minibroker.protocol.messages
        after = {k: R._response_class_registry[k] for k in (0, 1, 3)}
        assert all(before[k] is after[k] for k in (0, 1, 3)), (before, after)
        assert [after[k].__name__ for k in (0, 1, 3)] == ["ProduceResponse", "FetchResponse", "MetadataResponse"]
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_messages_importable_from_any_directory_before_kafka_protocol():
    code = "import minibroker.protocol.messages as m, kafka.protocol.api_header as h; " \
           "print(h.ResponseClassRegistry._response_class_registry[3].__name__)"
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "MetadataResponse"


# --- error codes -------------------------------------------------------------------------------

def test_our_error_codes():
    import kafka.errors as Errors
    assert (INVALID_PARTITION_METADATA, PARTITION_REASSIGNMENT_IN_PROGRESS) == (10001, 10002)
    assert max(k for k in Errors.kafka_errors if k is not None) < 1000
    assert issubclass(InvalidPartitionMetadataError, Errors.InvalidMetadataError)
    assert InvalidPartitionMetadataError.retriable and InvalidPartitionMetadataError.invalid_metadata
    assert for_code(10001) is InvalidPartitionMetadataError
    assert for_code(10002) is PartitionReassignmentInProgressError
    assert for_code(6) is Errors.NotLeaderForPartitionError
    assert [error_name(c) for c in (0, 3, 10001, 10002, 4242)] == [
        "NONE", "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_PARTITION_METADATA",
        "PARTITION_REASSIGNMENT_IN_PROGRESS", "UNKNOWN_4242"]
