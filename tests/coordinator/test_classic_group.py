"""The classic group state machine, driven directly on one broker's coordinator (no network).

A real Broker object that is not started: its replica manager leads __consumer_offsets-0 alone
(ISR = itself), so every coordinator write reaches the high watermark at once. Member ids come
from the broker's seeded IdSource, so the expected ids are computed from the same seed. Time is
virtual: session and rebalance timeouts pass with asyncio.sleep.
"""
from __future__ import annotations

import asyncio
import struct
import uuid


from minibroker.broker.broker import Broker
from minibroker.broker.faults import Faults
from minibroker.metadata.cache import PartitionInfo, TopicInfo
from minibroker.clock import Clock
from minibroker.config import ClusterConfig
from minibroker.coordinator import errors as E
from minibroker.coordinator import offset_manager as OM
from minibroker.coordinator.group.classic_group import (COMPLETING_REBALANCE, DEAD, EMPTY,
                                                        PREPARING_REBALANCE, STABLE, JoinResult,
                                                        SyncResult)
from minibroker.coordinator.group.classic_group_records import (group_metadata_record,
                                                                offset_commit_record)
from minibroker.coordinator.offsets import OFFSETS_TOPIC, java_string_hashcode, partition_for
from minibroker.ids import IdSource
from minibroker.protocol.records import decode_coordinator_record

from offsets_shard import lead, loaded, started

GROUP = "g"
SEED = 7
T0 = 1_000_000


def sub(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, null user data."""
    out = struct.pack(">hi", 0, len(topics))
    for t in topics:
        out += struct.pack(">h", len(t)) + t.encode()
    return out + struct.pack(">i", -1)


SUB = sub("t")


def expected_ids(*client_ids: str) -> list[str]:
    ids = IdSource(SEED)
    return [ids.member_id(c) for c in client_ids]


async def make_broker(**overrides) -> Broker:
    config = ClusterConfig(brokers=1, offsets_topic_num_partitions=1,
                           group_initial_rebalance_delay_ms=0, **overrides)
    b = Broker(1, config, Clock(wall_base_ms=T0), IdSource(SEED), None, Faults())
    b.metadata.put_topic(TopicInfo("t", uuid.UUID(int=1), False, {
        i: PartitionInfo(i, 1, 0, 0, (1,), (1,)) for i in range(2)}, 2, 2))
    b.metadata.put_topic(TopicInfo("u", uuid.UUID(int=3), False, {
        0: PartitionInfo(0, 1, 0, 0, (1,), (1,))}, 1, 1))
    return await started(b)


def join(b: Broker, member_id: str = "", client_id: str = "c1", instance: str | None = None,
         protocols=(("range", SUB),), protocol_type: str = "consumer", session: int = 10_000,
         rebalance: int = 20_000, require_known: bool = True, group: str = GROUP,
         skip: bool = False) -> asyncio.Future:
    return b.groups.classic.join_group(group, member_id, instance, require_known, client_id,
                                       "/127.0.0.1", rebalance, session, protocol_type,
                                       list(protocols), supports_skip_assignment=skip)


def sync(b: Broker, member_id: str, generation: int, assignments=(), instance=None,
         protocol_type=None, protocol_name=None) -> asyncio.Future:
    return b.groups.classic.sync_group(GROUP, generation, member_id, instance, protocol_type,
                                       protocol_name, list(assignments))


def group(b: Broker):
    return b.groups.shards[0].groups.get(GROUP)


def log_records(b: Broker) -> list:
    from kafka.record.default_records import DefaultRecordBatch
    p = b.replica_manager.get(OFFSETS_TOPIC, 0)
    out = []
    for view in p.log.read(0, 1 << 30).records:
        for r in DefaultRecordBatch(bytes(view)):
            out.append((r.key, r.value))
    return out


async def stable_one(b: Broker) -> str:
    """One member, generation 1, Stable with assignment b"a1"."""
    [m1] = expected_ids("c1")
    assert (await join(b)).error_code == E.MEMBER_ID_REQUIRED
    r = await join(b, m1)
    assert r.generation_id == 1
    assert (await sync(b, m1, 1, [(m1, b"a1")])).error_code == 0
    return m1


# ---------------------------------------------------------------------------------- routing
def test_java_string_hashcode_and_partition():
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("a") == 97
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("é") == 233
    assert java_string_hashcode("\U0001D11E") == 0xD834 * 31 + 0xDD1E      # UTF-16 surrogates
    assert java_string_hashcode("polygenelubricants") == -2**31
    assert partition_for("polygenelubricants", 50) == 0                   # Utils.abs(MIN) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("group-1", 50) == abs(java_string_hashcode("group-1")) % 50


# ---------------------------------------------------------------------------------- join / sync
async def test_two_phase_join_then_sync_to_stable(broker):
    m1, = expected_ids("c1")
    assert await join(broker) == JoinResult(E.MEMBER_ID_REQUIRED, m1)
    assert group(broker).state == EMPTY and m1 in group(broker).pending_members
    assert await join(broker, m1) == JoinResult(0, m1, 1, "consumer", "range", m1,
                                                [(m1, None, SUB)])
    assert group(broker).state == COMPLETING_REBALANCE
    assert await sync(broker, m1, 1, [(m1, b"a1")]) == SyncResult(0, "consumer", "range", b"a1")
    g = group(broker)
    assert (g.state, g.generation_id, g.leader_id) == (STABLE, 1, m1)
    assert broker.groups.classic.heartbeat(GROUP, m1, None, 1) == 0
    # The stored records: the empty first generation is never written (there was none); the
    # leader's SyncGroup wrote generation 1 with the assignment.
    assert log_records(broker) == [group_metadata_record(g)]


async def test_second_member_triggers_rebalance_and_follower_waits_for_leader(broker):
    m1 = await stable_one(broker)
    _, m2 = expected_ids("c1", "c2")
    r2 = join(broker, "", "c2")
    assert (await r2).error_code == E.MEMBER_ID_REQUIRED
    j2 = join(broker, m2, "c2")
    assert group(broker).state == PREPARING_REBALANCE
    assert not j2.done()
    assert broker.groups.classic.heartbeat(GROUP, m1, None, 1) == E.REBALANCE_IN_PROGRESS
    assert (await sync(broker, m1, 1)).error_code == E.REBALANCE_IN_PROGRESS
    j1 = join(broker, m1)
    r1, r2 = await j1, await j2
    assert r1 == JoinResult(0, m1, 2, "consumer", "range", m1, [(m1, None, SUB), (m2, None, SUB)])
    assert r2 == JoinResult(0, m2, 2, "consumer", "range", m1, [])
    follower = sync(broker, m2, 2)
    await asyncio.sleep(0)
    assert not follower.done()
    leader = sync(broker, m1, 2, [(m1, b"x1"), (m2, b"x2")])
    assert await leader == SyncResult(0, "consumer", "range", b"x1")
    assert await follower == SyncResult(0, "consumer", "range", b"x2")
    assert group(broker).state == STABLE


async def test_protocol_selection_by_votes(broker):
    m1, m2, m3 = expected_ids("c1", "c2", "c3")
    # require_known=False (JoinGroup v0-3): members join at once.
    f1 = join(broker, client_id="c1", require_known=False,
              protocols=(("roundrobin", b"r"), ("range", b"g")))
    await asyncio.sleep(0.001)
    g = group(broker)
    assert g.state == COMPLETING_REBALANCE and g.protocol_name == "roundrobin"
    await f1
    assert (await sync(broker, m1, 1, [(m1, b"")])).error_code == 0
    f2 = join(broker, client_id="c2", require_known=False,
              protocols=(("range", b"g"), ("sticky", b"s")))
    f3 = join(broker, client_id="c3", require_known=False,
              protocols=(("range", b"g"), ("roundrobin", b"r")))
    f1 = join(broker, m1, protocols=(("roundrobin", b"r"), ("range", b"g")))
    r1, r2, r3 = await f1, await f2, await f3
    # range: supported by all; votes range 2, roundrobin 1 (sticky is not a candidate).
    assert (r1.protocol_name, r2.protocol_name, r3.protocol_name) == ("range",) * 3
    assert r1.members == [(m1, None, b"g"), (m2, None, b"g"), (m3, None, b"g")]


async def test_join_errors(broker):
    cls = broker.groups.classic
    m1 = await stable_one(broker)
    assert (await join(broker, group="")).error_code == E.INVALID_GROUP_ID
    assert (await join(broker, "nobody")).error_code == E.UNKNOWN_MEMBER_ID
    assert (await join(broker, m1, group="other")).error_code == E.UNKNOWN_MEMBER_ID
    assert (await join(broker, session=100)).error_code == E.INVALID_SESSION_TIMEOUT
    assert (await join(broker, session=1_800_001)).error_code == E.INVALID_SESSION_TIMEOUT
    assert (await join(broker, protocol_type="connect")).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert (await join(broker, protocols=(("sticky", SUB),))).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert (await join(broker, protocols=())).error_code == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await join(broker, group="fresh", protocol_type="")).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    big = b"x" * (broker.config.message_max_bytes + 1)
    assert (await join(broker, protocols=(("range", big),))).error_code == E.INVALID_REQUEST
    assert (await join(broker, group="fresh2", protocols=(("range", big),))).error_code == \
        E.INVALID_REQUEST
    # Failed joins leave no groups behind, and the stable group is untouched.
    assert sorted(broker.groups.shards[0].groups) == [GROUP]
    assert group(broker).state == STABLE
    assert cls.heartbeat(GROUP, m1, None, 1) == 0


async def test_heartbeat_and_sync_errors(broker):
    cls = broker.groups.classic
    m1 = await stable_one(broker)
    assert cls.heartbeat(GROUP, "nobody", None, 1) == E.UNKNOWN_MEMBER_ID
    assert cls.heartbeat(GROUP, m1, None, 0) == E.ILLEGAL_GENERATION
    assert cls.heartbeat("unknown", m1, None, 1) == E.UNKNOWN_MEMBER_ID
    assert cls.heartbeat("", m1, None, 1) == E.INVALID_GROUP_ID
    assert (await sync(broker, m1, 7)).error_code == E.ILLEGAL_GENERATION
    assert (await sync(broker, "nobody", 1)).error_code == E.UNKNOWN_MEMBER_ID
    assert (await sync(broker, m1, 1, protocol_type="connect")).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert (await sync(broker, m1, 1, protocol_name="sticky")).error_code == \
        E.INCONSISTENT_GROUP_PROTOCOL
    # Stable: a repeated SyncGroup gets the stored assignment.
    assert await sync(broker, m1, 1, protocol_type="consumer", protocol_name="range") == \
        SyncResult(0, "consumer", "range", b"a1")


async def test_group_max_size():
    b = await make_broker(group_max_size=1)
    try:
        await stable_one(b)
        assert (await join(b, "", "c2", require_known=False)) == \
            JoinResult(E.GROUP_MAX_SIZE_REACHED, "")
    finally:
        await b.groups.stop()


async def test_session_timeout_removes_member_and_rebalances(broker):
    m1 = await stable_one(broker)
    _, m2 = expected_ids("c1", "c2")
    await join(broker, "", "c2")
    j2 = join(broker, m2, "c2", session=30_000)
    j1 = join(broker, m1)
    await j1, await j2
    s1 = sync(broker, m1, 2, [(m1, b"x1"), (m2, b"x2")])
    s2 = sync(broker, m2, 2)
    await s1, await s2
    # m2 keeps heartbeating, m1 goes silent: after its 10 s session it is removed.
    for _ in range(4):
        await asyncio.sleep(3)
        assert broker.groups.classic.heartbeat(GROUP, m2, None, 2) in (0, E.REBALANCE_IN_PROGRESS)
    g = group(broker)
    assert g.state == PREPARING_REBALANCE and list(g.members) == [m2]
    r2 = await join(broker, m2, "c2", session=30_000)
    assert r2 == JoinResult(0, m2, 3, "consumer", "range", m2, [(m2, None, SUB)])


async def test_rebalance_timeout_removes_members_that_do_not_rejoin(broker):
    m1 = await stable_one(broker)
    _, m2 = expected_ids("c1", "c2")
    await join(broker, "", "c2")
    j2 = join(broker, m2, "c2", session=30_000, rebalance=20_000)
    for _ in range(5):                        # m1 heartbeats but does not rejoin
        await asyncio.sleep(3)
        assert broker.groups.classic.heartbeat(GROUP, m1, None, 1) == E.REBALANCE_IN_PROGRESS
    assert not j2.done()                      # waits for m1 until the rebalance timeout (20 s)
    r2 = await j2
    assert r2 == JoinResult(0, m2, 2, "consumer", "range", m2, [(m2, None, SUB)])
    assert list(group(broker).members) == [m2]
    assert broker.groups.classic.heartbeat(GROUP, m1, None, 1) == E.UNKNOWN_MEMBER_ID


async def test_leave_group_to_empty_and_describe(broker):
    cls = broker.groups.classic
    m1 = await stable_one(broker)
    code, state, ptype, pdata, members = cls.describe_group(GROUP)
    assert (code, state, ptype, pdata) == (0, STABLE, "consumer", "range")
    assert members == [(m1, None, "c1", "/127.0.0.1", SUB, b"a1")]
    assert cls.leave_group(GROUP, [("nobody", None, None), (m1, None, "bye")]) == \
        (0, [E.UNKNOWN_MEMBER_ID, 0])
    g = group(broker)           # nobody left to wait for: the rebalance completed at once
    assert (g.state, g.generation_id, g.protocol_name) == (EMPTY, 2, None)
    assert cls.describe_group(GROUP) == (0, EMPTY, "consumer", "", [])
    assert cls.describe_group("unknown") == (0, DEAD, "", "", [])
    assert cls.leave_group("unknown", [("x", None, None)]) == (0, [E.UNKNOWN_MEMBER_ID])
    assert cls.list_groups(None, None) == (0, [(GROUP, "consumer", EMPTY)])
    assert cls.list_groups(["stable"], None) == (0, [])
    assert cls.list_groups(["EMPTY"], ["classic"]) == (0, [(GROUP, "consumer", EMPTY)])
    assert cls.list_groups(None, ["consumer"]) == (0, [])
    # The empty generation is stored too (Kafka's onCompleteJoin of an Empty group).
    assert log_records(broker)[-1] == group_metadata_record(g)


async def test_static_member_replacement_keeps_assignment_and_fences_old_id(broker):
    cls = broker.groups.classic
    m1, = expected_ids("i1")
    r = await join(broker, instance="i1")        # static members get their id at once
    assert r == JoinResult(0, m1, 1, "consumer", "range", m1, [(m1, "i1", SUB)])
    assert await sync(broker, m1, 1, [(m1, b"a1")], instance="i1") == \
        SyncResult(0, "consumer", "range", b"a1")
    _, m1b = expected_ids("i1", "i1")
    r = await join(broker, instance="i1")        # restart: same instance, unknown member id
    # Pre-v9: the old leader id is returned, so the new member does not run an assignment.
    assert r == JoinResult(0, m1b, 1, "consumer", "range", m1, [])
    assert group(broker).state == STABLE and group(broker).generation_id == 1
    assert await sync(broker, m1b, 1, instance="i1") == SyncResult(0, "consumer", "range", b"a1")
    assert cls.heartbeat(GROUP, m1, "i1", 1) == E.FENCED_INSTANCE_ID
    assert cls.heartbeat(GROUP, m1b, "i1", 1) == 0
    assert cls.heartbeat(GROUP, m1b, "other", 1) == E.UNKNOWN_MEMBER_ID
    assert (await sync(broker, m1, 1, instance="i1")).error_code == E.FENCED_INSTANCE_ID
    assert cls.leave_group(GROUP, [("", "i1", None)]) == (0, [0])


async def test_commit_and_fetch_offsets(broker):
    offsets = broker.groups.offsets
    m1 = await stable_one(broker)
    res = await offsets.commit_offsets(GROUP, 1, m1, None, -1, [
        ("t", 0, 10, 3, "meta", -1), ("t", 1, 11, -1, None, -1), ("nope", 0, 1, -1, None, -1),
        ("t", 9, 1, -1, None, -1), ("u", 0, 5, -1, "m" * 5000, -1)])
    assert res == {("t", 0): 0, ("t", 1): 0, ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
                   ("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION, ("u", 0): OM.OFFSET_METADATA_TOO_LARGE}
    assert offsets.fetch_offsets(GROUP, [("t", [0, 1]), ("u", [0])]) == (0, [
        ("t", [(0, 10, 3, "meta", 0), (1, 11, -1, "", 0)]), ("u", [(0, -1, -1, "", 0)])])
    assert offsets.fetch_offsets(GROUP, None) == (0, [("t", [(0, 10, 3, "meta", 0),
                                                          (1, 11, -1, "", 0)])])
    assert offsets.fetch_offsets("unknown", [("t", [0])]) == (0, [("t", [(0, -1, -1, "", 0)])])
    assert await offsets.commit_offsets(GROUP, 0, m1, None, -1, [("t", 0, 1, -1, None, -1)]) == \
        {("t", 0): E.ILLEGAL_GENERATION}
    assert await offsets.commit_offsets(GROUP, 1, "nobody", None, -1, [("t", 0, 1, -1, None, -1)]) \
        == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert await offsets.commit_offsets("unknown", 1, "x", None, -1, [("t", 0, 1, -1, None, -1)]) \
        == {("t", 0): E.ILLEGAL_GENERATION}
    # A standalone commit (generation -1) creates an Empty group without protocol type.
    assert await offsets.commit_offsets("solo", -1, "", None, -1, [("t", 0, 7, -1, None, -1)]) == \
        {("t", 0): 0}
    assert offsets.fetch_offsets("solo", None) == (0, [("t", [(0, 7, -1, "", 0)])])
    key, value = log_records(broker)[-1]
    k, v = decode_coordinator_record(key, value)
    assert (k.group, k.topic, k.partition, v.offset) == ("solo", "t", 0, 7)


async def test_delete_groups_and_offsets(broker):
    cls = broker.groups.classic
    offsets = broker.groups.offsets
    m1 = await stable_one(broker)
    await offsets.commit_offsets(GROUP, 1, m1, None, -1, [("t", 0, 10, -1, None, -1),
                                                       ("u", 0, 5, -1, None, -1)])
    assert await cls.delete_groups([GROUP, "unknown", ""]) == [
        (GROUP, E.NON_EMPTY_GROUP), ("unknown", E.GROUP_ID_NOT_FOUND), ("", E.INVALID_GROUP_ID)]
    assert await offsets.delete_offsets(GROUP, [("t", 0), ("u", 0), ("nope", 0)]) == (0, {
        ("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION})
    assert await offsets.delete_offsets("unknown", [("t", 0)]) == (E.GROUP_ID_NOT_FOUND, {})
    assert offsets.fetch_offsets(GROUP, None) == (0, [("t", [(0, 10, -1, "", 0)])])
    cls.leave_group(GROUP, [(m1, None, None)])
    await asyncio.sleep(0)
    assert await cls.delete_groups([GROUP]) == [(GROUP, 0)]
    assert group(broker) is None
    assert offsets.fetch_offsets(GROUP, None) == (0, [])
    assert await cls.delete_groups([GROUP]) == [(GROUP, E.GROUP_ID_NOT_FOUND)]
    # Tombstones: the offset of t-0 and the group.
    tail = [decode_coordinator_record(k, v) for k, v in log_records(broker)[-2:]]
    assert [(type(k).__name__, v) for k, v in tail] == [("OffsetCommitKey", None),
                                                         ("GroupMetadataKey", None)]


async def test_offsets_expire_after_the_group_became_empty():
    b = await make_broker(offsets_retention_minutes=1, offsets_retention_check_interval_ms=10_000)
    cls = b.groups.classic
    offsets = b.groups.offsets
    try:
        m1 = await stable_one(b)
        await offsets.commit_offsets(GROUP, 1, m1, None, -1, [("t", 0, 10, -1, None, -1),
                                                           ("u", 0, 3, -1, None, -1)])
        for _ in range(40):                     # 120 s Stable: t is subscribed and kept,
            await asyncio.sleep(3)              # u is not and expires after 60 s
            assert cls.heartbeat(GROUP, m1, None, 1) == 0
        assert offsets.fetch_offsets(GROUP, None)[1] == [("t", [(0, 10, -1, "", 0)])]
        await offsets.commit_offsets("solo", -1, "", None, -1, [("t", 1, 7, -1, None, -1)])
        cls.leave_group(GROUP, [(m1, None, None)])
        await asyncio.sleep(50)
        assert offsets.fetch_offsets(GROUP, None)[1] == [("t", [(0, 10, -1, "", 0)])]
        await asyncio.sleep(30)                 # > 60 s after the group became Empty
        assert offsets.fetch_offsets(GROUP, None) == (0, [])
        assert offsets.fetch_offsets("solo", None) == (0, [])
        assert group(b) is None and b.groups.shards[0].groups == {}
    finally:
        await b.groups.stop()


async def test_reload_after_leadership_change_restores_groups_and_offsets(broker):
    cls = broker.groups.classic
    offsets = broker.groups.offsets
    m1 = await stable_one(broker)
    await offsets.commit_offsets(GROUP, 1, m1, None, -1, [("t", 0, 10, 2, "m", -1)])
    # Another broker took over, then we lead again with a new epoch: unload, then replay.
    broker.replica_manager.apply_partition_state(OFFSETS_TOPIC, uuid.UUID(int=2), 0, 2, 1, 1,
                                                 [1, 2], [1, 2], 1, {})
    broker.groups.on_leadership_change()
    assert broker.groups.shards == {}
    assert cls.heartbeat(GROUP, m1, None, 1) == E.NOT_COORDINATOR
    lead(broker, epoch=2)
    assert cls.heartbeat(GROUP, m1, None, 1) == Errors_LOAD
    await loaded(broker)
    g = group(broker)
    assert (g.state, g.generation_id, g.leader_id, g.protocol_name) == (STABLE, 1, m1, "range")
    assert g.members[m1].assignment == b"a1"
    assert cls.heartbeat(GROUP, m1, None, 1) == 0
    assert offsets.fetch_offsets(GROUP, None) == (0, [("t", [(0, 10, 2, "m", 0)])])
    # The loaded member must heartbeat within its session timeout like any other.
    await asyncio.sleep(11)
    g = group(broker)
    assert (g.state, g.generation_id, list(g.members)) == (EMPTY, 2, [])


Errors_LOAD = 14   # COORDINATOR_LOAD_IN_PROGRESS


def test_offset_commit_record_format():
    from minibroker.coordinator.group.classic_group import OffsetAndMetadata
    key, value = offset_commit_record("g", "t", 1, OffsetAndMetadata(5, 2, "m", 100))
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x01"
    assert value[:2] == b"\x00\x03"                      # OffsetCommitValue v3
    key, value = offset_commit_record("g", "t", 1, OffsetAndMetadata(5, 2, "m", 100, 200))
    assert value[:2] == b"\x00\x01"                      # v1 keeps an explicit expire timestamp
    k, v = decode_coordinator_record(key, value)
    assert (v.offset, v.metadata, v.commit_timestamp, v.expire_timestamp) == (5, "m", 100, 200)
