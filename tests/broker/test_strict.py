"""Strict mode: a deliberately misbehaving raw client breaks each rule, and the violation is
recorded with the rule's name (the broker answers as it always does); used correctly, nothing is
recorded. One-broker in-process clusters on virtual time."""
from __future__ import annotations

import asyncio
import struct

import kafka.errors as Errors
from kafka.protocol.admin import CreatePartitionsRequest
from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest,
                                     SyncGroupRequest)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest

from cluster_helpers import connect, fetch_request, produce_request
from minibroker.broker.strict import RULES
from minibroker.client.group_protocol import encode_assignment
from minibroker.cluster import Cluster
from minibroker.log.batch import build_batch
from minibroker.network.client import encode_request

G = "sg"
_Proto = JoinGroupRequest.JoinGroupRequestProtocol
_Asg = SyncGroupRequest.SyncGroupRequestAssignment
_CTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_CPart = _CTopic.OffsetCommitRequestPartition


def rules(c: Cluster) -> list[str]:
    return [v["rule"] for v in c.violations]


async def strict_cluster(partitions: int = 2, **config) -> Cluster:
    c = await Cluster(brokers=1, strict=True, offsets_topic_replication_factor=1,
                      offsets_topic_num_partitions=2, group_initial_rebalance_delay_ms=0,
                      **config).start()
    await c.create_topic("t", partitions, 1)
    conn = await connect(c, 1, "setup")
    for _ in range(100):            # the group coordinator ready (a client backing off)
        r = await conn.request(FindCoordinatorRequest(key=G, key_type=0), 2)
        if r.error_code == 0:
            break
        await asyncio.sleep(0.2)
    conn.close()
    return c


async def raw(c: Cluster):
    b = c.brokers[1]
    return await asyncio.open_connection(b.host, b.port)


def frame(req, version: int, corr: int, client_id: str = "raw") -> bytes:
    return b"".join(bytes(p) for p in encode_request(req, version, corr, client_id))


def join(member_id: str = "", rebalance_timeout_ms: int = 20_000) -> JoinGroupRequest:
    return JoinGroupRequest(group_id=G, session_timeout_ms=10_000,
                            rebalance_timeout_ms=rebalance_timeout_ms, member_id=member_id,
                            group_instance_id=None, protocol_type="consumer",
                            protocols=[_Proto(name="range", metadata=b"\0\0\0\0\0\1\0\1t\0\0\0\0")])


async def joined(conn, rebalance_timeout_ms: int = 20_000) -> tuple[str, int]:
    """A member that follows KIP-394, as leader of a one-member group; (member id, generation)."""
    r = await conn.request(join(rebalance_timeout_ms=rebalance_timeout_ms), 5)
    assert r.error_code == Errors.MemberIdRequiredError.errno
    r = await conn.request(join(r.member_id, rebalance_timeout_ms), 5)
    assert r.error_code == 0
    return r.member_id, r.generation_id


async def synced(conn, member: str, gen: int, assignment: dict) -> None:
    r = await conn.request(SyncGroupRequest(group_id=G, generation_id=gen, member_id=member,
                                            assignments=[_Asg(member_id=member, assignment=
                                                              encode_assignment(assignment))]), 3)
    assert r.error_code == 0


def commit(gen: int, member: str) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id=G, generation_id_or_member_epoch=gen, member_id=member,
                               group_instance_id=None, topics=[_CTopic(name="t", partitions=[
                                   _CPart(partition_index=0, committed_offset=0,
                                          committed_leader_epoch=-1, committed_metadata="")])])


def test_every_rule_has_a_reference():
    assert len(RULES) >= 13 and all(("KIP-" in r or "protocol guide" in r) for r in RULES.values())


async def test_version_not_negotiated():
    c = await strict_cluster()
    try:
        reader, writer = await raw(c)
        writer.write(frame(ApiVersionsRequest(), 0, 1))
        await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
        writer.write(struct.pack(">ihhih", 13, 3, 99, 2, 3) + b"raw")    # Metadata v99
        assert await asyncio.wait_for(reader.read(), 10) == b""
        writer.close()
        assert rules(c) == ["version-not-negotiated"]
        v = c.violations[0]
        assert (v["api"], v["version"], v["corr"], v["client_id"]) == ("Metadata", 99, 2, "raw")
        assert "KIP-35" in v["reference"]
    finally:
        await c.stop()


async def test_correlation_id_reused_while_in_flight():
    c = await strict_cluster()
    try:
        reader, writer = await raw(c)
        # A long-poll Fetch stays in flight; a Metadata with the same correlation id follows.
        writer.write(frame(fetch_request("t", 0, 0, max_wait_ms=2000), 12, 7) +
                     frame(MetadataRequest(topics=None), 1, 7))
        for _ in range(2):
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            await reader.readexactly(size)
        writer.close()
        assert rules(c) == ["correlation-id-reused"]
    finally:
        await c.stop()


async def test_flexible_request_without_tagged_fields_in_its_header():
    c = await strict_cluster()
    try:
        reader, writer = await raw(c)
        body = MetadataRequest(topics=None, allow_auto_topic_creation=True,
                               include_topic_authorized_operations=False).encode(version=9)
        head = struct.pack(">hhih", 3, 9, 4, 3) + b"raw"            # header v1: no tag byte
        writer.write(struct.pack(">i", len(head) + len(body)) + head + bytes(body))
        await asyncio.wait_for(reader.read(), 10)      # closed, as Kafka does for a bad frame
        writer.close()
        assert rules(c) == ["flexible-header-missing"]
    finally:
        await c.stop()


async def test_throttle_ignored():
    c = await strict_cluster()
    try:
        c.fail_create_partitions("t", Errors.ThrottlingQuotaExceededError, 1,
                                 throttle_time_ms=5000)
        conn = await connect(c, 1, "impatient")
        req = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
            name="t", count=4, assignments=None)], timeout_ms=5000, validate_only=False)
        r = await conn.request(req, 3)
        assert r.throttle_time_ms == 5000
        await conn.request(MetadataRequest(topics=None), 1)            # at once: too early
        assert rules(c) == ["throttle-ignored"]
        await asyncio.sleep(5.1)
        await conn.request(MetadataRequest(topics=None), 1)            # waited: fine
        assert rules(c) == ["throttle-ignored"]
        conn.close()
    finally:
        await c.stop()


async def test_metadata_and_find_coordinator_storms():
    c = await strict_cluster(strict_storm_per_second=5)
    try:
        conn = await connect(c, 1, "stormy")
        for _ in range(4):                                             # within the limit
            await conn.request(MetadataRequest(topics=None), 1)
            await asyncio.sleep(0.2)
        assert rules(c) == []
        for _ in range(8):
            await conn.request(MetadataRequest(topics=None), 1)
            await conn.request(FindCoordinatorRequest(key=G, key_type=0), 2)
        assert sorted(set(rules(c))) == ["find-coordinator-storm", "metadata-storm"]
        conn.close()
    finally:
        await c.stop()


async def test_reconnect_storm():
    c = await strict_cluster()
    try:
        for _ in range(12):
            conn = await connect(c, 1, "flappy")
            await conn.request(ApiVersionsRequest(), 0)
            conn.close()
        assert rules(c) == ["reconnect-storm"]
    finally:
        await c.stop()


async def test_sequence_gap_and_reset_without_epoch_bump():
    c = await strict_cluster()
    try:
        conn = await connect(c, 1, "idem")
        r = await conn.request(InitProducerIdRequest(transactional_id=None,
                                                     transaction_timeout_ms=60000), 0)
        pid, epoch = r.producer_id, r.producer_epoch

        def batch(seq: int, n: int = 2) -> bytes:
            return bytes(build_batch([(None, b"v", [])] * n, producer_id=pid,
                                     producer_epoch=epoch, base_sequence=seq))
        for seq in (0, 2):
            r = await conn.request(produce_request("t", 0, batch(seq)), 9)
            assert r.responses[0].partition_responses[0].error_code == 0
        assert rules(c) == []
        await conn.request(produce_request("t", 0, batch(9)), 9)          # 4 expected
        assert rules(c) == ["sequence-gap"]
        await conn.request(produce_request("t", 0, batch(0)), 9)          # same epoch, from 0
        assert rules(c) == ["sequence-gap", "sequence-reset-without-epoch-bump"]
        conn.close()
    finally:
        await c.stop()


async def test_join_group_that_ignores_member_id_required():
    c = await strict_cluster()
    try:
        conn = await connect(c, 1, "joiner")
        await joined(conn)                                                 # the right way
        assert rules(c) == []
        r = await conn.request(join(), 5)
        assert r.error_code == Errors.MemberIdRequiredError.errno
        await conn.request(join(), 5)                                      # ignores it
        assert rules(c) == ["join-ignores-member-id-required"]
        conn.close()
    finally:
        await c.stop()


async def test_commit_with_a_stale_generation_after_told_to_rejoin():
    c = await strict_cluster()
    try:
        a = await connect(c, 1, "a")
        b = await connect(c, 1, "b")
        ma, gen = await joined(a, rebalance_timeout_ms=1000)
        await synced(a, ma, gen, {"t": [0, 1]})
        r = await a.request(commit(gen, ma), 8)
        assert r.topics[0].partitions[0].error_code == 0
        jb = asyncio.ensure_future(joined(b))
        await asyncio.sleep(0.1)
        r = await a.request(HeartbeatRequest(group_id=G, generation_id=gen, member_id=ma), 3)
        assert r.error_code == Errors.RebalanceInProgressError.errno    # told to rejoin
        mb, gen_b = await jb              # a never rejoins: removed after its rebalance timeout
        await synced(b, mb, gen_b, {"t": [0, 1]})
        r = await a.request(commit(gen, ma), 8)
        assert r.topics[0].partitions[0].error_code in (Errors.IllegalGenerationError.errno,
                                                       Errors.UnknownMemberIdError.errno)
        assert rules(c) == ["stale-generation-commit"]
        a.close()
        b.close()
    finally:
        await c.stop()


async def test_fetch_of_a_partition_not_assigned():
    c = await strict_cluster()
    try:
        conn = await connect(c, 1, "member")
        m, gen = await joined(conn)
        await synced(conn, m, gen, {"t": [0]})
        await asyncio.sleep(1.5)
        await conn.request(fetch_request("t", 0, 0), 12)                  # assigned
        assert rules(c) == []
        await conn.request(fetch_request("t", 1, 0), 12)                  # not assigned
        assert rules(c) == ["fetch-unassigned-partition"]
        conn.close()
    finally:
        await c.stop()


async def test_transactional_produce_before_add_partitions():
    c = await strict_cluster(transaction_state_log_replication_factor=1,
                             transaction_state_log_min_isr=1)
    try:
        conn = await connect(c, 1, "txn")
        for _ in range(100):
            r = await conn.request(FindCoordinatorRequest(key="tx", key_type=1), 2)
            if r.error_code == 0:
                break
            await asyncio.sleep(0.1)
        for _ in range(100):
            r = await conn.request(InitProducerIdRequest(transactional_id="tx",
                                                         transaction_timeout_ms=60000), 0)
            if r.error_code == 0:
                break
            await asyncio.sleep(0.1)
        assert r.error_code == 0
        records = bytes(build_batch([(None, b"v", [])], producer_id=r.producer_id,
                                    producer_epoch=r.producer_epoch, base_sequence=0,
                                    transactional=True))
        req = produce_request("t", 0, records)
        req.transactional_id = "tx"
        await conn.request(req, 9)
        assert rules(c) == ["produce-before-add-partitions"]
        conn.close()
    finally:
        await c.stop()


async def test_violations_reach_the_trace(tmp_path):
    path = tmp_path / "t.jsonl"
    c = await strict_cluster(trace=str(path))
    try:
        conn = await connect(c, 1, "joiner")
        r = await conn.request(join(), 5)
        await conn.request(join(), 5)
        conn.close()
    finally:
        await c.stop()
    text = path.read_text()
    assert '"rule":"join-ignores-member-id-required"' in text and r.error_code == 79
