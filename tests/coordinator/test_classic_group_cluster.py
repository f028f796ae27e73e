"""Groups and offsets over the wire: a 3-broker in-process cluster, requests through
KafkaClientConnection, on virtual time; then kafka-python consumers against a ThreadedCluster."""
from __future__ import annotations

import asyncio
import threading
import time

import kafka.errors as Errors
import pytest
from kafka.protocol.admin import (DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest)
from kafka.protocol.consumer import (HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
                                     OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
                                     SyncGroupRequest)
from kafka.protocol.metadata import FindCoordinatorRequest

from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection

GROUP = "cg"
_Proto = JoinGroupRequest.JoinGroupRequestProtocol
_Asg = SyncGroupRequest.SyncGroupRequestAssignment
_CTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_CPart = _CTopic.OffsetCommitRequestPartition
_FTopic = OffsetFetchRequest.OffsetFetchRequestTopic
_FGroup = OffsetFetchRequest.OffsetFetchRequestGroup
_LMember = LeaveGroupRequest.MemberIdentity
_DTopic = OffsetDeleteRequest.OffsetDeleteRequestTopic
_DPart = _DTopic.OffsetDeleteRequestPartition


async def connect(c: Cluster, node_id: int, client_id: str = "cli") -> KafkaClientConnection:
    b = c.brokers[node_id]
    return await KafkaClientConnection.connect(b.host, b.port, client_id=client_id)


async def find_coordinator(c: Cluster, via: int, group: str = GROUP) -> int:
    conn = await connect(c, via)
    try:
        for _ in range(200):
            r = await conn.request(FindCoordinatorRequest(key=group, key_type=0), 3)
            if r.error_code == 0:
                return r.node_id
            assert r.error_code == Errors.CoordinatorNotAvailableError.errno
            await asyncio.sleep(0.05)
    finally:
        conn.close()
    raise AssertionError("no coordinator")


def join_req(member_id: str = "", protocol_type: str = "consumer", session: int = 10_000,
             protocols=(("range", b"sub"),), group: str = GROUP):
    return JoinGroupRequest(group_id=group, session_timeout_ms=session,
                            rebalance_timeout_ms=20_000, member_id=member_id,
                            group_instance_id=None, protocol_type=protocol_type,
                            protocols=[_Proto(name=n, metadata=m) for n, m in protocols])


def commit_req(gen: int, member_id: str, offsets: dict[tuple[str, int], int]):
    topics: dict[str, list] = {}
    for (t, p), o in sorted(offsets.items()):
        topics.setdefault(t, []).append(_CPart(partition_index=p, committed_offset=o,
                                               committed_leader_epoch=-1,
                                               committed_metadata="m"))
    return OffsetCommitRequest(group_id=GROUP, generation_id_or_member_epoch=gen,
                               member_id=member_id, group_instance_id=None,
                               topics=[_CTopic(name=t, partitions=ps) for t, ps in topics.items()])


def fetched(resp) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in resp.topics for p in t.partitions}


@pytest.mark.timeout(60)
async def test_two_members_join_sync_heartbeat_leave_and_errors():
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as c:
        await c.create_topic("t", 2, 3)
        coord = await find_coordinator(c, via=1)
        # FindCoordinator v4 (batched) agrees, and transactions are not available.
        conn = await connect(c, 2)
        r = await conn.request(FindCoordinatorRequest(key_type=0, coordinator_keys=[GROUP]), 4)
        [co] = r.coordinators
        assert (co.key, co.node_id, co.error_code) == (GROUP, coord, 0)
        r = await conn.request(FindCoordinatorRequest(key="txn", key_type=1), 2)
        assert r.error_code == Errors.CoordinatorNotAvailableError.errno
        # A broker that does not coordinate the group says so.
        other = next(i for i in (1, 2, 3) if i != coord)
        oc = await connect(c, other)
        r = await oc.request(HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="x"), 3)
        assert r.error_code == Errors.NotCoordinatorError.errno

        a = await connect(c, coord, "a")
        b = await connect(c, coord, "b")
        # v4+: MEMBER_ID_REQUIRED first, then the real join.
        r = await a.request(join_req(), 5)
        assert r.error_code == Errors.MemberIdRequiredError.errno and r.member_id.startswith("a-")
        ma = r.member_id
        r = await a.request(join_req(ma), 5)
        assert (r.error_code, r.generation_id, r.leader, r.protocol_name) == (0, 1, ma, "range")
        r = await a.request(SyncGroupRequest(group_id=GROUP, generation_id=1, member_id=ma,
                                             assignments=[_Asg(member_id=ma, assignment=b"A")]), 3)
        assert (r.error_code, r.assignment) == (0, b"A")
        # b joins (v3: no MEMBER_ID_REQUIRED); a learns of the rebalance from its heartbeat.
        jb = asyncio.ensure_future(b.request(join_req(), 3))
        await asyncio.sleep(0.05)
        r = await a.request(HeartbeatRequest(group_id=GROUP, generation_id=1, member_id=ma), 3)
        assert r.error_code == Errors.RebalanceInProgressError.errno
        ja = await a.request(join_req(ma), 7)
        jb = await jb
        mb = jb.member_id
        assert (ja.error_code, ja.generation_id, ja.leader, ja.protocol_type) == (0, 2, ma,
                                                                                  "consumer")
        assert [(m.member_id, m.metadata) for m in ja.members] == [(ma, b"sub"), (mb, b"sub")]
        assert (jb.error_code, jb.generation_id, jb.leader, jb.members) == (0, 2, ma, [])
        sb = asyncio.ensure_future(b.request(SyncGroupRequest(
            group_id=GROUP, generation_id=2, member_id=mb, protocol_type="consumer",
            protocol_name="range", assignments=[]), 5))
        sa = await a.request(SyncGroupRequest(
            group_id=GROUP, generation_id=2, member_id=ma, assignments=[
                _Asg(member_id=ma, assignment=b"A0"), _Asg(member_id=mb, assignment=b"B1")]), 3)
        sb = await sb
        assert (sa.error_code, sa.assignment) == (0, b"A0")
        assert (sb.error_code, sb.protocol_name, sb.assignment) == (0, "range", b"B1")
        for conn_, m in ((a, ma), (b, mb)):
            r = await conn_.request(HeartbeatRequest(group_id=GROUP, generation_id=2,
                                                     member_id=m), 4)
            assert r.error_code == 0

        # Wrong input, each with Kafka's error code.
        async def hb(gen, member):
            return (await a.request(HeartbeatRequest(group_id=GROUP, generation_id=gen,
                                                     member_id=member), 3)).error_code
        assert await hb(2, "nobody") == Errors.UnknownMemberIdError.errno
        assert await hb(1, ma) == Errors.IllegalGenerationError.errno
        bad = {
            "protocol type": (join_req(protocol_type="connect"), 3,
                              Errors.InconsistentGroupProtocolError.errno),
            "no common protocol": (join_req(protocols=(("sticky", b""),)), 3,
                                   Errors.InconsistentGroupProtocolError.errno),
            "session timeout": (join_req(session=10), 3, Errors.InvalidSessionTimeoutError.errno),
            "oversized metadata": (join_req(protocols=(("range", b"x" * (1 << 20 + 1)),)), 3,
                                   Errors.InvalidRequestError.errno),
            "unknown member": (join_req("nobody"), 3, Errors.UnknownMemberIdError.errno),
            "empty group id": (join_req(group=""), 3, Errors.InvalidGroupIdError.errno),
        }
        x = await connect(c, coord, "x")
        for what, (req, version, code) in bad.items():
            r = await x.request(req, version)
            assert r.error_code == code, what
        r = await x.request(SyncGroupRequest(group_id=GROUP, generation_id=1, member_id=ma,
                                             assignments=[]), 3)
        assert r.error_code == Errors.IllegalGenerationError.errno
        r = await x.request(DeleteGroupsRequest(groups_names=[GROUP, "nope"]), 1)
        assert [(g.group_id, g.error_code) for g in r.results] == [
            (GROUP, Errors.NonEmptyGroupError.errno), ("nope", Errors.GroupIdNotFoundError.errno)]
        r = await x.request(DescribeGroupsRequest(groups=[GROUP]), 4)
        [g] = r.groups
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
            0, "Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.member_assignment) for m in g.members] == [
            (ma, "a", b"A0"), (mb, "b", b"B1")]
        r = await x.request(ListGroupsRequest(states_filter=["Stable"]), 4)
        assert [(g.group_id, g.group_state) for g in r.groups] == [(GROUP, "Stable")]

        # Offsets.
        r = await a.request(commit_req(2, ma, {("t", 0): 5, ("t", 1): 6, ("nope", 0): 1}), 8)
        assert {(t.name, p.partition_index): p.error_code for t in r.topics
                for p in t.partitions} == {("t", 0): 0, ("t", 1): 0,
                                           ("nope", 0): Errors.UnknownTopicOrPartitionError.errno}
        r = await a.request(commit_req(1, ma, {("t", 0): 9}), 8)
        assert r.topics[0].partitions[0].error_code == Errors.IllegalGenerationError.errno
        r = await x.request(OffsetFetchRequest(group_id=GROUP, topics=[
            _FTopic(name="t", partition_indexes=[0, 1])]), 5)
        assert (r.error_code, fetched(r)) == (0, {("t", 0): (5, 0), ("t", 1): (6, 0)})
        rt = c.brokers[coord].groups            # a group without offsets on the same broker,
        none = next(g for g in (f"none{i}" for i in range(1000))   # and one elsewhere
                    if rt.partition_for(g) in rt.shards)
        elsewhere = next(g for g in (f"else{i}" for i in range(1000))
                         if rt.partition_for(g) not in rt.shards)
        r = await x.request(OffsetFetchRequest(groups=[
            _FGroup(group_id=GROUP, topics=None), _FGroup(group_id=none, topics=None),
            _FGroup(group_id=elsewhere, topics=None)], require_stable=True), 8)
        assert [(g.group_id, g.error_code, {(t.name, p.partition_index): p.committed_offset
                                            for t in g.topics for p in t.partitions})
                for g in r.groups] == [(GROUP, 0, {("t", 0): 5, ("t", 1): 6}), (none, 0, {}),
                                 (elsewhere, Errors.NotCoordinatorError.errno, {})]
        r = await x.request(OffsetDeleteRequest(group_id=GROUP, topics=[
            _DTopic(name="t", partitions=[_DPart(partition_index=0)])]), 0)
        # "sub" is not a parseable subscription, so the group counts as subscribed to everything.
        assert r.topics[0].partitions[0].error_code == Errors.GroupSubscribedToTopicError.errno
        r = await x.request(OffsetDeleteRequest(group_id="nope", topics=[]), 0)
        assert r.error_code == Errors.GroupIdNotFoundError.errno

        # Leaving: b with v0 (top-level error), then a in a batch with an unknown member (v3).
        r = await b.request(LeaveGroupRequest(group_id=GROUP, member_id=mb), 0)
        assert r.error_code == 0
        r = await a.request(LeaveGroupRequest(group_id=GROUP, members=[
            _LMember(member_id=ma, group_instance_id=None),
            _LMember(member_id="nobody", group_instance_id=None)]), 3)
        assert (r.error_code, [(m.member_id, m.error_code) for m in r.members]) == (
            0, [(ma, 0), ("nobody", Errors.UnknownMemberIdError.errno)])
        r = await x.request(DescribeGroupsRequest(groups=[GROUP]), 0)
        assert (r.groups[0].group_state, r.groups[0].members) == ("Empty", [])
        for conn_ in (a, b, x, conn, oc):
            conn_.close()


@pytest.mark.timeout(60)
async def test_committed_offsets_survive_the_coordinator_broker_stopping():
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as c:
        await c.create_topic("t", 3, 3)
        coord = await find_coordinator(c, via=1)
        conn = await connect(c, coord, "a")
        r = await conn.request(join_req(), 3)
        m, gen = r.member_id, r.generation_id
        r = await conn.request(SyncGroupRequest(group_id=GROUP, generation_id=gen, member_id=m,
                                                assignments=[_Asg(member_id=m, assignment=b"A")]),
                               3)
        assert r.error_code == 0
        offsets = {("t", 0): 10, ("t", 1): 20, ("t", 2): 30}
        r = await conn.request(commit_req(gen, m, offsets), 7)
        assert all(p.error_code == 0 for t in r.topics for p in t.partitions)
        conn.close()

        await c.stop_broker(coord)
        survivor = next(i for i in (1, 2, 3) if i != coord)
        new = coord
        for _ in range(200):
            new = await find_coordinator(c, via=survivor)
            if new != coord:
                break
            await asyncio.sleep(0.05)
        assert new != coord
        conn = await connect(c, new)
        for _ in range(200):
            r = await conn.request(OffsetFetchRequest(group_id=GROUP, topics=None), 7)
            if r.error_code != Errors.CoordinatorLoadInProgressError.errno:
                break
            await asyncio.sleep(0.01)
        assert r.error_code == 0
        assert {k: o for k, (o, _) in fetched(r).items()} == offsets
        # The member's group moved too: it is known (Stable, loaded from the log).
        r = await conn.request(DescribeGroupsRequest(groups=[GROUP]), 3)
        assert (r.groups[0].group_state, [x.member_id for x in r.groups[0].members]) == (
            "Stable", [m])
        r = await conn.request(HeartbeatRequest(group_id=GROUP, generation_id=gen, member_id=m), 3)
        assert r.error_code == 0
        conn.close()


# ---------------------------------------------------------------------------------- real client
@pytest.mark.real_time
@pytest.mark.timeout(120)
def test_kafka_python_consumers_share_partitions_and_rebalance_on_leave():
    from kafka import KafkaConsumer

    from minibroker.testing import ThreadedCluster

    with ThreadedCluster(brokers=3, group_initial_rebalance_delay_ms=0) as c:
        c.create_topic("six", 6, 3)
        consumers = [KafkaConsumer("six", bootstrap_servers=c.bootstrap, group_id="kp",
                                   client_id=f"c{i}", session_timeout_ms=6000,
                                   heartbeat_interval_ms=500, auto_offset_reset="earliest")
                     for i in range(3)]
        try:
            # Metadata first. A kafka-python 3.0.x leader that assigns before it has the topic's
            # metadata rejoins when the metadata arrives; if a 100 ms poll then times out
            # mid-join, the next poll's need_rejoin() reads False (the leader already took the
            # new snapshot) and the finished join is never applied: that member stays
            # "rebalancing" without heartbeats until it is expired (~4 runs in 100 before).
            for k in consumers:
                assert k.partitions_for_topic("six") == set(range(6))

            def poll_until(members, done, deadline_s=40):
                stop = threading.Event()

                def run(k):
                    while not stop.is_set():
                        k.poll(timeout_ms=100)
                threads = [threading.Thread(target=run, args=(k,)) for k in members]
                for t in threads:
                    t.start()
                end = time.monotonic() + deadline_s
                try:
                    while time.monotonic() < end:
                        owned = [sorted(tp.partition for tp in k.assignment()) for k in members]
                        if done(owned):
                            return owned
                        time.sleep(0.1)
                    raise AssertionError(f"assignment never settled: {owned}")
                finally:
                    stop.set()
                    for t in threads:
                        t.join()

            def exactly_once(owned):
                return sorted(sum(owned, [])) == list(range(6)) and all(owned)

            def settled(each):
                # Between generations a member still shows its last assignment: wait for the
                # end state, each partition owned once and `each` partitions per member.
                return lambda owned: exactly_once(owned) and all(len(o) == each for o in owned)

            poll_until(consumers, settled(2))
            consumers[2].close()                       # LeaveGroup → rebalance
            poll_until(consumers[:2], settled(3))
        finally:
            for k in consumers:
                k.close()
