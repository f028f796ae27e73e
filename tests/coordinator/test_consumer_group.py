"""KIP-848 consumer groups on one broker's coordinator (no network), on virtual time.

A real, unstarted Broker leads __consumer_offsets-0 alone, so every coordinator write reaches the
high watermark at once. Topic "t" (2 partitions) and "u" (1) have replicas on brokers 1-3 in racks
r1-r3. Covers reconciliation (revoke before reassign), fencing and errors, leaving, static
members, timeouts, records and replay, the deprecated-record migration, regex subscriptions, and
KIP-1101's group epoch bump rule: a bump exactly when a subscribed topic's id, name, partition
count or partition racks change, never on leader / ISR / epoch changes.
"""
from __future__ import annotations

import asyncio
import dataclasses
import uuid


from minibroker.broker.broker import Broker
from minibroker.broker.faults import Faults
from minibroker.metadata.cache import BrokerInfo, PartitionInfo, TopicInfo
from minibroker.clock import Clock
from minibroker.config import ClusterConfig
from minibroker.coordinator import errors as E
from minibroker.coordinator.group import consumer_group as C
from minibroker.coordinator.group import consumer_group_records as R
from minibroker.coordinator.offsets import OFFSETS_TOPIC
from minibroker.ids import IdSource
from minibroker.protocol.messages import ConsumerGroupHeartbeatRequest
from minibroker.protocol.records import (ConsumerGroupPartitionMetadataKey,
                                         ConsumerGroupPartitionMetadataValue,
                                         decode_coordinator_record, encode_coordinator_key,
                                         encode_coordinator_value)

from offsets_shard import lead, loaded, started

GROUP = "g"
T = uuid.UUID(int=1)
U = uuid.UUID(int=3)
_TP = ConsumerGroupHeartbeatRequest.TopicPartitions


def topic(name: str, tid: uuid.UUID, n: int, leader: int = 1, epoch: int = 0,
          replicas=(1, 2, 3)) -> TopicInfo:
    return TopicInfo(name, tid, False, {
        i: PartitionInfo(i, leader, epoch, epoch, tuple(replicas), tuple(replicas))
        for i in range(n)}, n, n)


def brokers(**racks) -> list[BrokerInfo]:
    return [BrokerInfo(int(k[1:]), "h", 9000 + int(k[1:]), v) for k, v in sorted(racks.items())]


async def make_broker() -> Broker:
    config = ClusterConfig(brokers=1, offsets_topic_num_partitions=1,
                           group_initial_rebalance_delay_ms=0)
    b = Broker(1, config, Clock(wall_base_ms=0), IdSource(7), None, Faults())
    b.metadata.update_brokers(brokers(b1="r1", b2="r2", b3="r3"))
    b.metadata.put_topic(topic("t", T, 2))
    b.metadata.put_topic(topic("u", U, 1))
    return await started(b)


def req(member_id: str, epoch: int, **kw) -> ConsumerGroupHeartbeatRequest:
    if epoch == 0:
        kw.setdefault("rebalance_timeout_ms", 30_000)
        kw.setdefault("topic_partitions", [])
        if "subscribed_topic_regex" not in kw:
            kw.setdefault("subscribed_topic_names", ["t"])
    if "owned" in kw:
        kw["topic_partitions"] = [_TP(topic_id=t, partitions=sorted(ps))
                                  for t, ps in sorted(kw.pop("owned").items())]
    return ConsumerGroupHeartbeatRequest(group_id=kw.pop("group", GROUP), member_id=member_id,
                                         member_epoch=epoch, **kw)


async def hb(b: Broker, member_id: str, epoch: int, version: int = 1, **kw):
    return await b.groups.consumer.heartbeat(req(member_id, epoch, **kw), version, "cli", "/h")


def assigned(r) -> dict[uuid.UUID, list[int]]:
    return {tp.topic_id: list(tp.partitions) for tp in r.assignment.topic_partitions}


def group(b: Broker) -> C.ConsumerGroup:
    return b.groups.shards[0].consumer_groups[GROUP]


def log_records(b: Broker) -> list:
    from kafka.record.default_records import DefaultRecordBatch
    p = b.replica_manager.get(OFFSETS_TOPIC, 0)
    out = []
    for view in p.log.read(0, 1 << 30).records:
        for r in DefaultRecordBatch(bytes(view)):
            out.append(decode_coordinator_record(r.key, r.value))
    return out


# ---------------------------------------------------------------------------------- join, records
async def test_first_member_gets_everything_with_exact_records(broker):
    r = await hb(broker, "m1", 0)
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == \
        (0, "m1", 1, 5000)
    assert assigned(r) == {T: [0, 1]}
    g = group(broker)
    h = g.metadata_hash
    assert h != 0 and (g.group_epoch, g.assignment_epoch, g.state) == (1, 1, C.STABLE)
    m = g.members["m1"]
    expected = [R.member_metadata_record(GROUP, dataclasses.replace(
                    m, member_epoch=0, previous_member_epoch=0, assigned_partitions={})),
                R.group_epoch_record(GROUP, 1, h),
                R.target_member_record(GROUP, "m1", {T: frozenset({0, 1})}),
                R.target_metadata_record(GROUP, 1),
                R.current_assignment_record(GROUP, m)]
    assert log_records(broker) == [decode_coordinator_record(k, v) for k, v in expected]
    # A plain heartbeat changes nothing and sends no assignment.
    n = len(log_records(broker))
    r = await hb(broker, "m1", 1)
    assert (r.error_code, r.member_epoch, r.assignment) == (0, 1, None)
    assert len(log_records(broker)) == n


async def test_partitions_are_revoked_before_they_are_reassigned(broker):
    await hb(broker, "m1", 0)
    r2 = await hb(broker, "m2", 0)
    # m2 is at the new epoch but gets nothing: both partitions are still m1's.
    assert (r2.member_epoch, assigned(r2)) == (2, {})
    assert group(broker).members["m2"].state == C.UNRELEASED_PARTITIONS
    r1 = await hb(broker, "m1", 1)
    assert (r1.member_epoch, assigned(r1)) == (1, {T: [0]})          # revoke 1, stay in epoch 1
    assert group(broker).members["m1"].state == C.UNREVOKED_PARTITIONS
    assert group(broker).state == C.RECONCILING
    r2 = await hb(broker, "m2", 2)
    assert (r2.member_epoch, r2.assignment) == (2, None)               # 1 not released yet
    r1 = await hb(broker, "m1", 1, owned={T: [0, 1]})                  # still owns 1
    assert (r1.member_epoch, group(broker).members["m1"].state) == (1, C.UNREVOKED_PARTITIONS)
    r1 = await hb(broker, "m1", 1, owned={T: [0]})                     # revoked
    assert (r1.member_epoch, r1.assignment) == (2, None)
    r2 = await hb(broker, "m2", 2)
    assert (r2.member_epoch, assigned(r2)) == (2, {T: [1]})
    assert group(broker).state == C.STABLE


async def test_errors_fencing_and_leaving(broker):
    await hb(broker, "m1", 0)
    bad = [
        (req("m1", 5), E.FENCED_MEMBER_EPOCH),
        (req("m1", 0, rebalance_timeout_ms=-1), E.INVALID_REQUEST),
        (req("", 1), E.INVALID_REQUEST),
        (req("m9", 1), E.UNKNOWN_MEMBER_ID),
        (req("m9", 1, group="nope"), E.GROUP_ID_NOT_FOUND),
        (req("m9", 0, server_assignor="sticky"), E.UNSUPPORTED_ASSIGNOR),
        (req("m9", 0, subscribed_topic_regex="t("), E.INVALID_REGULAR_EXPRESSION),
        (req("m9", -3), E.INVALID_REQUEST),
        (req("m1", -2), E.INVALID_REQUEST),                        # static leave, no instance
        (req("m9", 0, topic_partitions=[_TP(topic_id=T, partitions=[0])]), E.INVALID_REQUEST),
    ]
    for r, code in bad:
        resp = await broker.groups.consumer.heartbeat(r, 1, "cli", "/h")
        assert resp.error_code == code, (r, resp)
    # A member behind by one epoch is accepted only with a subset of its assignment (lost
    # response); otherwise it is fenced.
    await hb(broker, "m2", 0)
    await hb(broker, "m1", 1)
    await hb(broker, "m1", 1, owned={T: [0]})
    assert group(broker).members["m1"].member_epoch == 2
    assert (await hb(broker, "m1", 1, owned={T: [0]})).error_code == 0
    assert (await hb(broker, "m1", 1)).error_code == E.FENCED_MEMBER_EPOCH
    # Leaving: epoch -1, tombstones, the group epoch bumps; the partitions move to m2.
    epoch = group(broker).group_epoch
    r = await hb(broker, "m1", -1)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "m1", -1)
    assert "m1" not in group(broker).members and group(broker).group_epoch == epoch + 1
    assert group(broker).state == C.ASSIGNING
    r = await hb(broker, "m2", 2)
    assert (r.member_epoch, assigned(r)) == (3, {T: [0, 1]})
    assert (await hb(broker, "m1", 2)).error_code == E.UNKNOWN_MEMBER_ID


async def test_session_and_rebalance_timeouts_fence_members(broker):
    await hb(broker, "m1", 0)
    await hb(broker, "m2", 0)
    await hb(broker, "m1", 1)                      # asked to revoke partition 1
    # m2 keeps heartbeating, m1 never revokes: fenced after its rebalance timeout (30 s).
    for _ in range(8):
        await asyncio.sleep(5)
        await hb(broker, "m2", group(broker).members["m2"].member_epoch)
    m2 = group(broker).members["m2"]
    assert list(group(broker).members) == ["m2"]
    assert (m2.member_epoch, m2.assigned_partitions) == (3, {T: frozenset({0, 1})})
    # Silence past group.consumer.session.timeout.ms (45 s) fences m2 too.
    await asyncio.sleep(46)
    assert group(broker).members == {} and group(broker).state == C.EMPTY


async def test_static_member_leaves_temporarily_and_is_replaced(broker):
    r = await hb(broker, "s1", 0, instance_id="i1")
    assert assigned(r) == {T: [0, 1]}
    # Another member id with the same instance id while s1 is there: refused.
    assert (await hb(broker, "s2", 0, instance_id="i1")).error_code == E.UNRELEASED_INSTANCE_ID
    epoch = group(broker).group_epoch
    r = await hb(broker, "s1", -2, instance_id="i1")
    assert (r.error_code, r.member_epoch) == (0, -2)
    assert group(broker).group_epoch == epoch                  # no bump for a static leave
    r = await hb(broker, "s2", 0, instance_id="i1")
    assert (r.error_code, r.member_epoch, assigned(r)) == (0, epoch, {T: [0, 1]})
    assert sorted(group(broker).members) == ["s2"] and group(broker).group_epoch == epoch
    assert (await hb(broker, "s1", 1, instance_id="i1")).error_code == E.FENCED_INSTANCE_ID


async def test_v0_coordinator_names_the_member_and_range_assignor(broker):
    r = await hb(broker, "", 0, version=0, server_assignor="range",
                 subscribed_topic_names=["t", "u"])
    assert r.error_code == 0 and len(r.member_id) == 32
    r2 = await hb(broker, "", 0, version=0, server_assignor="range",
                  subscribed_topic_names=["t", "u"])
    g = group(broker)
    first, second = sorted([r.member_id, r2.member_id])
    assert g.preferred_assignor() == "range"
    assert g.target_assignment == {first: {T: frozenset({0}), U: frozenset({0})},
                                   second: {T: frozenset({1})}} or \
        g.target_assignment == {first: {T: frozenset({0})},
                                second: {T: frozenset({1}), U: frozenset({0})}}


# ---------------------------------------------------------------------------------- KIP-1101
async def test_group_epoch_bump_rule(broker):
    """Bump exactly on id / name / partition count / rack changes of subscribed topics."""
    md = broker.metadata
    await hb(broker, "m1", 0)
    g = group(broker)

    async def beat() -> int:
        r = await hb(broker, "m1", g.members["m1"].member_epoch)
        assert r.error_code == 0
        return group(broker).group_epoch

    assert await beat() == 1
    cache = broker.groups.consumer.topic_hashes
    assert "t" in cache and "u" not in cache             # lazily, subscribed topics only
    # Leader move, ISR shrink, epoch bumps: the hash is recomputed, equal: no bump.
    md.put_topic(topic("t", T, 2, leader=2, epoch=5))
    assert "t" not in cache
    assert await beat() == 1 and "t" in cache
    t = topic("t", T, 2, leader=3, epoch=6)
    t.partitions[0] = dataclasses.replace(t.partitions[0], isr=(3,))
    md.put_topic(t)
    assert await beat() == 1
    # Another topic changes, a broker goes away (keeps its rack), comes back: no bump.
    md.put_topic(topic("u", U, 4))
    md.update_brokers(brokers(b1="r1", b2="r2"))
    assert await beat() == 1
    md.update_brokers(brokers(b1="r1", b2="r2", b3="r3"))
    assert await beat() == 1
    # A partition added: one bump; its heartbeats after that: none.
    md.put_topic(topic("t", T, 3))
    assert await beat() == 2
    assert await beat() == 2
    assert g.target_assignment["m1"] == {T: frozenset({0, 1, 2})}
    # A broker restarted with another rack: one bump.
    md.update_brokers(brokers(b1="r1", b2="r2", b3="r9"))
    assert await beat() == 3
    assert await beat() == 3
    # Replicas moved to other brokers in the same racks... a rack set change: bump.
    md.put_topic(topic("t", T, 3, replicas=(1, 2)))
    assert await beat() == 4
    # The topic recreated with a new id: bump; deleted: bump.
    md.put_topic(topic("t", uuid.UUID(int=9), 3, replicas=(1, 2)))
    assert await beat() == 5
    md.remove_topic("t")
    assert await beat() == 6
    assert g.metadata_hash == 0                           # no subscribed topic exists
    # The member subscribes elsewhere: "t" leaves the cache, nobody subscribes to it.
    md.put_topic(topic("t", T, 2))
    assert await beat() == 7
    assert "t" in cache
    r = await hb(broker, "m1", g.members["m1"].member_epoch, subscribed_topic_names=["u"])
    assert r.error_code == 0
    assert "t" not in cache and "u" in cache
    assert group(broker).group_epoch == 8


async def test_regex_subscription_follows_new_topics(broker):
    r = await hb(broker, "m1", 0, subscribed_topic_regex="t.*")
    assert (r.member_epoch, assigned(r)) == (1, {T: [0, 1]})
    broker.metadata.put_topic(topic("tx", uuid.UUID(int=11), 1))
    broker.metadata.put_topic(topic("other", uuid.UUID(int=12), 1))
    r = await hb(broker, "m1", 1)
    assert (r.member_epoch, assigned(r)) == (2, {T: [0, 1], uuid.UUID(int=11): [0]})
    assert group(broker).subscribed_topics == {"t", "tx"}


async def test_reload_keeps_epoch_and_hash_without_bump(broker):
    """The coordinator moves (unload, replay from the log): same epochs, hash, assignments."""
    await hb(broker, "m1", 0)
    await hb(broker, "m2", 0)
    await hb(broker, "m1", 1)
    await hb(broker, "m1", 1, owned={T: [0]})
    await hb(broker, "m2", 2)
    before = group(broker)
    snapshot = (before.group_epoch, before.assignment_epoch, before.metadata_hash,
                dict(before.members), dict(before.target_assignment))
    n = len(log_records(broker))
    lead(broker, 1)                      # a new leader epoch: unload, then load by replay
    await loaded(broker)
    after = group(broker)
    assert after is not before
    assert (after.group_epoch, after.assignment_epoch, after.metadata_hash, after.members,
            after.target_assignment) == snapshot
    # The hash cache starts empty on "the new coordinator"; heartbeats recompute, no bump.
    broker.groups.consumer.topic_hashes.clear()
    for m in ("m1", "m2"):
        r = await hb(broker, m, 2)
        assert (r.error_code, r.member_epoch, r.assignment) == (0, 2, None)
    assert group(broker).group_epoch == 2 and len(log_records(broker)) == n


async def test_deprecated_partition_metadata_is_tombstoned_on_upgrade(broker):
    """A group written by a pre-KIP-1101 coordinator: no MetadataHash (0) and a
    ConsumerGroupPartitionMetadataValue. The first heartbeat bumps once (same assignment: the
    assignor is sticky) and tombstones the deprecated record."""
    await hb(broker, "m1", 0)
    shard = broker.groups.shards[0]
    V = ConsumerGroupPartitionMetadataValue
    old = [R.group_epoch_record(GROUP, 1, 0),
           (encode_coordinator_key(ConsumerGroupPartitionMetadataKey(group_id=GROUP)),
            encode_coordinator_value(V(topics=[V.TopicMetadata(
                topic_id=T, topic_name="t", num_partitions=2, partition_metadata=[])]), 0))]
    await broker.groups.append(shard, old, None)
    lead(broker, 1)
    await loaded(broker)
    g = group(broker)
    assert (g.group_epoch, g.metadata_hash, g.has_partition_metadata_record) == (1, 0, True)
    r = await hb(broker, "m1", 1)
    assert (r.error_code, r.member_epoch, r.assignment) == (0, 2, None)
    g = group(broker)
    assert g.group_epoch == 2 and g.metadata_hash != 0 and not g.has_partition_metadata_record
    tail = log_records(broker)[-4:]
    assert tail[0] == (ConsumerGroupPartitionMetadataKey(group_id=GROUP), None)
    assert decode_coordinator_record(*R.group_epoch_record(GROUP, 2, g.metadata_hash)) in tail
    r = await hb(broker, "m1", 2)
    assert (r.member_epoch, group(broker).group_epoch) == (2, 2)


async def test_offset_commit_checks_the_member_epoch(broker):
    await hb(broker, "m1", 0)
    cls = broker.groups.classic
    offsets = broker.groups.offsets
    ok = await offsets.commit_offsets(GROUP, 1, "m1", None, -1, [("t", 0, 5, -1, "", -1)])
    assert ok == {("t", 0): 0}
    stale = await offsets.commit_offsets(GROUP, 7, "m1", None, -1, [("t", 0, 6, -1, "", -1)])
    assert stale == {("t", 0): E.STALE_MEMBER_EPOCH}
    unknown = await offsets.commit_offsets(GROUP, 1, "zz", None, -1, [("t", 0, 6, -1, "", -1)])
    assert unknown == {("t", 0): E.UNKNOWN_MEMBER_ID}
    code, topics = offsets.fetch_offsets(GROUP, None)
    assert (code, [(t, [p[:2] for p in ps]) for t, ps in topics]) == (0, [("t", [(0, 5)])])
    # ListGroups / DescribeGroups know it is a consumer group.
    assert broker.groups.consumer.list_groups(None, None) == [(GROUP, "consumer", "Stable",
                                                               "consumer")]
    assert cls.list_groups(None, None) == (0, [])
    assert cls.describe_group(GROUP)[1] == "Dead"
    [d] = broker.groups.consumer.describe([GROUP])
    assert (d.error_code, d.group_state, d.group_epoch, d.assignor_name) == (0, "Stable", 1,
                                                                              "uniform")
    [d] = broker.groups.consumer.describe(["nope"])
    assert d.error_code == E.GROUP_ID_NOT_FOUND
