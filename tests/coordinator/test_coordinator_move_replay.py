"""A coordinator move rebuilds every group by replaying __consumer_offsets, through the same
`replay` the live coordinator applied its records with: the replayed groups equal the live ones.

Groups over the wire on a 3-broker in-process cluster (virtual time), all on __consumer_offsets-0:
a classic group with a dynamic and a static member (distinct subscriptions and assignments) and
committed offsets, a classic group whose members left (an Empty generation), a standalone group
that only commits offsets, and a KIP-848 consumer group with committed offsets. The coordinator
moves twice: the partition's leader is moved (Cluster.move_leader), then its broker is stopped.
"""
from __future__ import annotations

import asyncio

import kafka.errors as Errors
import pytest
from kafka.protocol.consumer import (JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
                                     SyncGroupRequest)
from kafka.protocol.metadata import FindCoordinatorRequest

from minibroker.cluster import Cluster
from minibroker.coordinator.offsets import OFFSETS_TOPIC
from minibroker.network.client import KafkaClientConnection
from minibroker.protocol.messages import ConsumerGroupHeartbeatRequest

CLASSIC, EMPTIED, STANDALONE, KIP848 = "classic", "emptied", "standalone", "kip848"
_Proto = JoinGroupRequest.JoinGroupRequestProtocol
_Asg = SyncGroupRequest.SyncGroupRequestAssignment
_CTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_CPart = _CTopic.OffsetCommitRequestPartition
_TP = ConsumerGroupHeartbeatRequest.TopicPartitions
RETRY = {Errors.NotCoordinatorError.errno, Errors.CoordinatorLoadInProgressError.errno,
         Errors.CoordinatorNotAvailableError.errno}


async def connect(c: Cluster, node: int, client_id: str) -> KafkaClientConnection:
    b = c.brokers[node]
    return await KafkaClientConnection.connect(b.host, b.port, client_id=client_id)


async def coordinator(c: Cluster, not_: int | None = None) -> int:
    """The coordinator of every group (one __consumer_offsets partition), once loaded."""
    for _ in range(400):
        via = next(b for b in c.brokers.values() if b.running)
        conn = await connect(c, via.node_id, "find")
        try:
            r = await conn.request(FindCoordinatorRequest(key=CLASSIC, key_type=0), 3)
        finally:
            conn.close()
        if r.error_code == 0 and r.node_id != not_:
            _, code = c.brokers[r.node_id].groups.shard_for(CLASSIC)
            if code == 0:
                return r.node_id
        await asyncio.sleep(0.05)
    raise AssertionError("no loaded coordinator")


def join(group: str, member_id: str = "", instance: str | None = None, meta: bytes = b"",
         protocols: tuple[str, ...] = ("range", "roundrobin")):
    return JoinGroupRequest(group_id=group, session_timeout_ms=30_000,
                            rebalance_timeout_ms=20_000, member_id=member_id,
                            group_instance_id=instance, protocol_type="consumer",
                            protocols=[_Proto(name=n, metadata=meta + n.encode())
                                       for n in protocols], reason=None)


async def join_until_done(conn: KafkaClientConnection, req) -> object:
    r = await conn.request(req, 7)
    if r.error_code == Errors.MemberIdRequiredError.errno:
        req.member_id = r.member_id
        r = await conn.request(req, 7)
    assert r.error_code == 0, r
    return r


def commit(group: str, generation: int, member_id: str, offsets: dict[tuple[str, int], int]):
    topics: dict[str, list] = {}
    for (t, p), o in sorted(offsets.items()):
        topics.setdefault(t, []).append(_CPart(partition_index=p, committed_offset=o,
                                               committed_leader_epoch=3,
                                               committed_metadata=f"{group}-{p}"))
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=generation,
                               member_id=member_id, group_instance_id=None,
                               retention_time_ms=-1,
                               topics=[_CTopic(name=t, partitions=ps) for t, ps in topics.items()])


async def committed_ok(conn: KafkaClientConnection, req) -> None:
    r = await conn.request(req, 8)
    assert all(p.error_code == 0 for t in r.topics for p in t.partitions), r


def classic_view(group) -> tuple:
    """Everything a classic group stores: state, generation, protocol, leader, members in order
    with their metadata and assignment, static members, committed offsets."""
    members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                m.rebalance_timeout_ms, m.session_timeout_ms, m.protocol_type,
                m.metadata(group.protocol_name) if group.protocol_name else None, m.assignment)
               for m in group.members.values()]
    return (group.state, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id, members, dict(group.static_members), dict(group.offsets))


def consumer_view(group) -> tuple:
    """Everything a KIP-848 group stores (members are frozen dataclasses: all their fields)."""
    return (group.state, group.group_epoch, group.assignment_epoch, group.metadata_hash,
            dict(group.members), dict(group.static_members), dict(group.target_assignment),
            dict(group.owners))


def views(c: Cluster, node: int) -> dict:
    shard, code = c.brokers[node].groups.shard_for(CLASSIC)
    assert code == 0
    out = {g: classic_view(shard.groups[g]) for g in sorted(shard.groups)}
    out[KIP848] = (consumer_view(shard.consumer_groups[KIP848]), out.pop(KIP848))
    return out


@pytest.mark.timeout(120)
async def test_replayed_groups_equal_the_live_ones_after_coordinator_moves():
    async with Cluster(brokers=3, offsets_topic_num_partitions=1,
                       group_initial_rebalance_delay_ms=0) as c:
        await c.create_topic("t", 4, 3)
        coord = await coordinator(c)

        # A classic group: "a" (dynamic) joins, then "b" (static) joins and "a" rejoins.
        a, b = await connect(c, coord, "client-a"), await connect(c, coord, "client-b")
        ra = await join_until_done(a, join(CLASSIC, meta=b"A"))
        gen, ma = ra.generation_id, ra.member_id
        r = await a.request(SyncGroupRequest(group_id=CLASSIC, generation_id=gen, member_id=ma,
                                             assignments=[_Asg(member_id=ma, assignment=b"a1")]),
                            3)
        assert r.error_code == 0
        b_joins = asyncio.ensure_future(join_until_done(
            b, join(CLASSIC, instance="static-b", meta=b"B", protocols=("roundrobin", "range"))))
        await asyncio.sleep(0.5)             # b waits in PreparingRebalance for a to rejoin
        ra = await join_until_done(a, join(CLASSIC, ma, meta=b"A"))
        rb = await b_joins
        gen, mb = ra.generation_id, rb.member_id
        assert gen == rb.generation_id and ra.leader == ma
        sa, sb = await asyncio.gather(
            a.request(SyncGroupRequest(group_id=CLASSIC, generation_id=gen, member_id=ma,
                                       assignments=[_Asg(member_id=ma, assignment=b"a2"),
                                                    _Asg(member_id=mb, assignment=b"b2")]), 3),
            b.request(SyncGroupRequest(group_id=CLASSIC, generation_id=gen, member_id=mb,
                                       group_instance_id="static-b", assignments=[]), 3))
        assert (sa.error_code, sa.assignment, sb.error_code, sb.assignment) == (0, b"a2", 0, b"b2")
        await committed_ok(a, commit(CLASSIC, gen, ma, {("t", 0): 5, ("t", 1): 7}))

        # A classic group whose only member left: Empty, generation 2, offsets kept.
        e = await connect(c, coord, "client-e")
        re_ = await join_until_done(e, join(EMPTIED, meta=b"E"))
        r = await e.request(SyncGroupRequest(group_id=EMPTIED, generation_id=1,
                                             member_id=re_.member_id,
                                             assignments=[_Asg(member_id=re_.member_id,
                                                               assignment=b"e1")]), 3)
        assert r.error_code == 0
        await committed_ok(e, commit(EMPTIED, 1, re_.member_id, {("t", 2): 11}))
        r = await e.request(LeaveGroupRequest(group_id=EMPTIED, members=[
            LeaveGroupRequest.MemberIdentity(member_id=re_.member_id, group_instance_id=None,
                                             reason="done")]), 4)
        assert r.error_code == 0
        # A standalone group: offsets only.
        await committed_ok(e, commit(STANDALONE, -1, "", {("t", 3): 13}))

        # A KIP-848 group with two members and committed offsets.
        k = await connect(c, coord, "client-k")
        epochs = {}
        for m in ("k1", "k2"):
            r = await k.request(ConsumerGroupHeartbeatRequest(
                group_id=KIP848, member_id=m, member_epoch=0, rebalance_timeout_ms=30_000,
                subscribed_topic_names=["t"], topic_partitions=[]), 1)
            assert r.error_code == 0, r
            epochs[m] = r.member_epoch
        await committed_ok(k, commit(KIP848, epochs["k1"], "k1", {("t", 0): 21}))
        for conn in (a, b, e, k):
            conn.close()

        live = views(c, coord)
        assert sorted(live) == [CLASSIC, EMPTIED, KIP848, STANDALONE]
        assert live[CLASSIC][:5] == ("Stable", gen, "consumer", "range", ma)
        assert [m[:2] for m in live[CLASSIC][5]] == [(ma, None), (mb, "static-b")]
        assert live[EMPTIED][:4] == ("Empty", 2, "consumer", None)
        assert live[STANDALONE][:2] == ("Empty", 0)

        # Move 1: the partition's leader moves to another broker, which replays the log.
        other = next(i for i in sorted(c.brokers) if i != coord)
        await c.move_leader(OFFSETS_TOPIC, 0, other)
        moved = await coordinator(c, not_=coord)
        assert moved == other
        assert views(c, moved) == live

        # Move 2: that broker stops; the next leader replays the same log.
        await c.stop_broker(moved)
        last = await coordinator(c, not_=moved)
        assert views(c, last) == live


# ---------------------------------------------------------------------------------- one broker
async def test_replaying_the_log_after_each_step_gives_the_live_classic_groups():
    """Driven directly on one broker's coordinator: after each step that stores something, the
    partition's log replayed into a fresh shard gives exactly the live groups (what they store)."""
    from minibroker.coordinator.replay import replay_all
    from minibroker.coordinator.shard import Shard
    from test_classic_group import GROUP, expected_ids, join, log_records, make_broker, sync

    b = await make_broker()
    offsets = b.groups.offsets

    def check() -> None:
        fresh = Shard(0, 0)
        replay_all(fresh, log_records(b))
        live = b.groups.shards[0].groups
        assert {g: classic_view(fresh.groups[g]) for g in sorted(fresh.groups)} == \
            {g: classic_view(live[g]) for g in sorted(live)}

    try:
        m1, = expected_ids("c1")
        await join(b)
        assert (await join(b, m1)).generation_id == 1
        await sync(b, m1, 1, [(m1, b"a1")])
        check()                                                   # Stable, one member
        assert await offsets.commit_offsets(GROUP, 1, m1, None, -1, [
            ("t", 0, 10, 3, "m", -1), ("t", 1, 11, -1, None, -1)]) == {("t", 0): 0, ("t", 1): 0}
        check()                                                   # + offsets
        _, s1 = expected_ids("c1", "i1")
        static = join(b, instance="i1", client_id="c2", protocols=(("roundrobin", b"x"),
                                                                    ("range", b"y")))
        await asyncio.sleep(0)
        r1 = await join(b, m1)
        rs = await static
        assert r1.generation_id == rs.generation_id == 2 and rs.member_id == s1
        await asyncio.gather(sync(b, m1, 2, [(m1, b"a2"), (s1, b"s2")]),
                             sync(b, s1, 2, instance="i1"))
        check()                                                   # Stable, dynamic + static
        _, _, s2 = expected_ids("c1", "i1", "i1")
        assert (await join(b, instance="i1", client_id="c2", protocols=(
            ("roundrobin", b"x"), ("range", b"y")))).member_id == s2
        check()                                                   # the static member replaced
        assert await offsets.delete_offsets(GROUP, [("t", 1)]) == (0, {("t", 1): SUBSCRIBED})
        assert b.groups.classic.leave_group(GROUP, [(m1, None, None), ("", "i1", None)]) == \
            (0, [0, 0])
        check()                                                   # Empty generation 3
        assert (await offsets.delete_offsets(GROUP, [("t", 1)]))[0] == 0
        check()                                                   # an offset tombstone
        assert await offsets.commit_offsets("solo", -1, "", None, -1,
                                            [("t", 0, 7, -1, None, -1)]) == {("t", 0): 0}
        check()                                                   # a standalone committer
        assert await b.groups.classic.delete_groups([GROUP, "solo"]) == [(GROUP, 0), ("solo", 0)]
        assert b.groups.shards[0].groups == {}
        check()                                                   # both deleted
    finally:
        await b.groups.stop()


SUBSCRIBED = Errors.GroupSubscribedToTopicError.errno
