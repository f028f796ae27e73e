"""Valid request frames built with kafka-python's encoders: the seeds the fuzzers mutate (the CI
hypothesis tests here and benchmarks/fuzz_long.py). Each is (api_key, version, frame bytes
without the 4-byte size)."""
from __future__ import annotations

import struct
import uuid

from kafka.protocol.admin import (CreatePartitionsRequest, CreateTopicsRequest,
                                  DeleteTopicsRequest, DescribeConfigsRequest,
                                  DescribeGroupsRequest, ListGroupsRequest)
from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
                                     ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest,
                                     SyncGroupRequest)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from minibroker.log.batch import build_batch
from minibroker.network.client import encode_request
from minibroker.protocol.messages import FetchRequestKip253 as FetchRequest

TOPIC = "fuzz"
GROUP = "fuzz-group"


def _frame(req, version: int, corr: int = 1) -> bytes:
    return b"".join(bytes(p) for p in encode_request(req, version, corr, "fuzz"))[4:]


def seeds() -> list[tuple[int, int, bytes]]:
    records = bytes(build_batch([(b"k", b"v" * 20, [("h", b"x")]), (None, b"w", [])],
                                timestamp=1_700_000_000_000))
    P = ProduceRequest
    produce = P(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        P.TopicProduceData(name=TOPIC, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=records)])])
    F = FetchRequest
    fetch = F(replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
              session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
              topics=[F.FetchTopic(topic=TOPIC, topic_id=uuid.UUID(int=0), partitions=[
                  F.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1,
                                              fetch_offset=0, last_fetched_epoch=-1,
                                              log_start_offset=-1,
                                              partition_max_bytes=1 << 20)])])
    L = ListOffsetsRequest
    list_offsets = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=TOPIC, partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1)])])
    J = JoinGroupRequest
    join = J(group_id=GROUP, session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
             member_id="", group_instance_id=None, protocol_type="consumer",
             protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01")])
    S = SyncGroupRequest
    sync = S(group_id=GROUP, generation_id=1, member_id="m", group_instance_id=None,
             protocol_type="consumer", protocol_name="range",
             assignments=[S.SyncGroupRequestAssignment(member_id="m", assignment=b"a")])
    C = OffsetCommitRequest
    commit = C(group_id=GROUP, generation_id_or_member_epoch=-1, member_id="",
               group_instance_id=None, topics=[C.OffsetCommitRequestTopic(name=TOPIC, partitions=[
                   C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                       partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                       committed_metadata="")])])
    OF = OffsetFetchRequest
    offset_fetch = OF(group_id=GROUP, topics=[OF.OffsetFetchRequestTopic(
        name=TOPIC, partition_indexes=[0])])
    CT = CreateTopicsRequest
    create = CT(topics=[CT.CreatableTopic(name="fuzz-new", num_partitions=2,
                                          replication_factor=1, assignments=[], configs=[])],
                timeout_ms=1000, validate_only=False)
    CP = CreatePartitionsRequest
    create_parts = CP(topics=[CP.CreatePartitionsTopic(name=TOPIC, count=3, assignments=None)],
                      timeout_ms=1000, validate_only=False)
    DC = DescribeConfigsRequest
    describe = DC(resources=[DC.DescribeConfigsResource(resource_type=2, resource_name=TOPIC,
                                                        configuration_keys=None)])
    M = MetadataRequest
    metadata = M(topics=[M.MetadataRequestTopic(topic_id=None, name=TOPIC)],
                 allow_auto_topic_creation=True, include_topic_authorized_operations=False)
    return [
        (18, 3, _frame(ApiVersionsRequest(client_software_name="fuzz",
                                          client_software_version="1"), 3)),
        (3, 12, _frame(metadata, 12)),
        (3, 1, _frame(M(topics=None), 1)),
        (0, 9, _frame(produce, 9)),
        (0, 3, _frame(produce, 3)),
        (1, 12, _frame(fetch, 12)),
        (1, 4, _frame(fetch, 4)),
        (2, 7, _frame(list_offsets, 7)),
        (10, 3, _frame(FindCoordinatorRequest(key=GROUP, key_type=0), 3)),
        (11, 5, _frame(join, 5)),
        (14, 3, _frame(sync, 3)),
        (12, 3, _frame(HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="m"), 3)),
        (13, 3, _frame(LeaveGroupRequest(group_id=GROUP, members=[
            LeaveGroupRequest.MemberIdentity(member_id="m", group_instance_id=None)]), 3)),
        (8, 8, _frame(commit, 8)),
        (9, 5, _frame(offset_fetch, 5)),
        (15, 3, _frame(DescribeGroupsRequest(groups=[GROUP]), 3)),
        (16, 3, _frame(ListGroupsRequest(), 3)),
        (19, 5, _frame(create, 5)),
        (37, 2, _frame(create_parts, 2)),
        (20, 4, _frame(DeleteTopicsRequest(topic_names=["fuzz-new"], timeout_ms=1000), 4)),
        (32, 3, _frame(describe, 3)),
    ]


INTERESTING_INT32 = [0, 1, -1, -2, 0x7FFFFFFF, -0x80000000, 0x7FFF, 0x8000, 0xFFFF, 255]


def mutate(data: bytes, rng) -> bytes:
    """One to four of: flip a bit, set a byte, write an interesting int32, cut, duplicate or
    delete a slice. `rng` is a random.Random."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if not b:
            b = bytearray(rng.randbytes(rng.randint(1, 16)))
        op = rng.randrange(6)
        i = rng.randrange(len(b))
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i] = rng.choice((0, 0xFF, 0x7F, 0x80, 0x01, rng.randrange(256)))
        elif op == 2 and len(b) >= 4:
            i = rng.randrange(len(b) - 3)
            struct.pack_into(">i", b, i, rng.choice(INTERESTING_INT32))
        elif op == 3:
            del b[rng.randrange(len(b)):]
        elif op == 4:
            j = min(len(b), i + rng.randint(1, 32))
            b[i:i] = b[i:j]
        else:
            j = min(len(b), i + rng.randint(1, 16))
            del b[i:j]
    return bytes(b)
