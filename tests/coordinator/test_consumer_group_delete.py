"""DeleteGroups (key 42) on KIP-848 consumer groups: only an Empty group is deleted (else
NON_EMPTY_GROUP), with tombstones for its offsets and its group records, so neither a reload on the
same broker nor a new coordinator after a failover brings it back; List/Describe/
ConsumerGroupDescribe no longer show it."""
from __future__ import annotations

import kafka.errors as Errors
import pytest
from kafka.protocol.admin import DeleteGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest

from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection
from minibroker.protocol.records import (ConsumerGroupMetadataKey,
                                         ConsumerGroupPartitionMetadataKey,
                                         ConsumerGroupTargetAssignmentMetadataKey,
                                         OffsetCommitKey)
from tests.coordinator.test_consumer_group import (GROUP, make_broker, group, hb,  # noqa: F401
                                                   lead, loaded, log_records)
from tests.coordinator.test_consumer_group_cluster import GROUP as WIRE_GROUP
from tests.coordinator.test_consumer_group_cluster import (RETRY, describe, find_coordinator,
                                                           heartbeat)

NON_EMPTY_GROUP = Errors.NonEmptyGroupError.errno
GROUP_ID_NOT_FOUND = Errors.GroupIdNotFoundError.errno
INVALID_GROUP_ID = Errors.InvalidGroupIdError.errno


def commit(b, member: str, epoch: int, *offsets):
    return b.groups.offsets.commit_offsets(GROUP, epoch, member, None, -1,
                                           [(t, p, o, -1, "", -1) for t, p, o in offsets])


def shows(b) -> tuple:
    """What ListGroups, DescribeGroups and ConsumerGroupDescribe say about GROUP."""
    cls, cons = b.groups.classic, b.groups.consumer
    [d] = cons.describe([GROUP])
    return (cls.list_groups(None, None), cons.list_groups(None, None),
            cls.describe_group(GROUP)[1], d.error_code)


async def test_delete_consumer_group_only_when_empty_with_tombstones(broker):
    assert (await hb(broker, "m1", 0)).member_epoch == 1
    assert await commit(broker, "m1", 1, ("t", 0, 5), ("u", 0, 3)) == {("t", 0): 0, ("u", 0): 0}
    cls = broker.groups.classic
    offsets = broker.groups.offsets
    assert await cls.delete_groups([GROUP, "nope", ""]) == [
        (GROUP, NON_EMPTY_GROUP), ("nope", GROUP_ID_NOT_FOUND), ("", INVALID_GROUP_ID)]
    assert offsets.fetch_offsets(GROUP, None)[1] == [("t", [(0, 5, -1, "", 0)]),
                                                 ("u", [(0, 3, -1, "", 0)])]
    assert (await hb(broker, "m1", -1)).error_code == 0          # leaves: the group is Empty
    assert group(broker).state == "Empty"
    n = len(log_records(broker))

    assert await cls.delete_groups([GROUP]) == [(GROUP, 0)]
    shard = broker.groups.shards[0]
    assert GROUP not in shard.consumer_groups and GROUP not in shard.groups
    assert offsets.fetch_offsets(GROUP, None) == (0, [])
    assert shows(broker) == ((0, []), [], "Dead", GROUP_ID_NOT_FOUND)
    # Offsets first, then the group's records (Kafka's GroupCoordinatorShard.deleteGroups).
    assert log_records(broker)[n:] == [
        (OffsetCommitKey(group=GROUP, topic="t", partition=0), None),
        (OffsetCommitKey(group=GROUP, topic="u", partition=0), None),
        (ConsumerGroupTargetAssignmentMetadataKey(group_id=GROUP), None),
        (ConsumerGroupPartitionMetadataKey(group_id=GROUP), None),
        (ConsumerGroupMetadataKey(group_id=GROUP), None)]
    assert await cls.delete_groups([GROUP]) == [(GROUP, GROUP_ID_NOT_FOUND)]

    lead(broker, 1)                          # reload by replay: the tombstones win
    await loaded(broker)
    shard = broker.groups.shards[0]
    assert GROUP not in shard.consumer_groups and GROUP not in shard.groups
    assert shows(broker) == ((0, []), [], "Dead", GROUP_ID_NOT_FOUND)
    # The id is free again: a new member starts a new group at epoch 1.
    assert (await hb(broker, "m2", 0)).member_epoch == 1


async def test_delete_consumer_group_also_tombstones_an_old_classic_record(broker):
    """A group id once used by a classic group (its Empty GroupMetadata record in the log), now
    a consumer group: deleting it must not leave the classic group to reappear on replay."""
    from minibroker.coordinator.group.classic_group import ClassicGroup
    from minibroker.coordinator.group.classic_group_records import group_metadata_record
    shard = broker.groups.shards[0]
    old = ClassicGroup(GROUP, "Empty", 0)
    old.generation_id, old.protocol_type = 3, "consumer"
    await broker.groups.append(shard, [group_metadata_record(old)], None)
    lead(broker, 1)
    await loaded(broker)
    assert broker.groups.classic.list_groups(None, None) == (0, [(GROUP, "consumer", "Empty")])
    assert (await hb(broker, "m1", 0)).error_code == 0
    assert (await hb(broker, "m1", -1)).error_code == 0
    assert await broker.groups.classic.delete_groups([GROUP]) == [(GROUP, 0)]
    lead(broker, 2)
    await loaded(broker)
    assert shows(broker) == ((0, []), [], "Dead", GROUP_ID_NOT_FOUND)


@pytest.mark.timeout(60)
async def test_deleted_consumer_group_stays_deleted_after_coordinator_failover():
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as c:
        await c.create_topic("t", 2, 3)
        coord = await find_coordinator(c)
        r = await heartbeat(c, coord, "m1", 0, owned={}, rebalance_timeout_ms=30_000,
                            subscribed_topic_names=["t"])
        assert (r.error_code, r.member_epoch) == (0, 1)
        codes = await c.brokers[coord].groups.offsets.commit_offsets(
            WIRE_GROUP, 1, "m1", None, -1, [("t", 0, 7, -1, "", -1), ("t", 1, 9, -1, "", -1)])
        assert codes == {("t", 0): 0, ("t", 1): 0}
        b = c.brokers[coord]
        conn = await KafkaClientConnection.connect(b.host, b.port, client_id="admin")
        try:
            r = await conn.request(DeleteGroupsRequest(groups_names=[WIRE_GROUP]), 2)
            assert [(x.group_id, x.error_code) for x in r.results] == [(WIRE_GROUP,
                                                                         NON_EMPTY_GROUP)]
            assert (await heartbeat(c, coord, "m1", -1)).error_code == 0
            r = await conn.request(DeleteGroupsRequest(groups_names=[WIRE_GROUP]), 2)
            assert [(x.group_id, x.error_code) for x in r.results] == [(WIRE_GROUP, 0)]
        finally:
            conn.close()

        await c.stop_broker(coord)
        new = await find_coordinator(c, not_=coord)
        for _ in range(400):
            g = await describe(c, new)
            if g.error_code not in RETRY:
                break
        assert g.error_code == GROUP_ID_NOT_FOUND
        nb = c.brokers[new]
        conn = await KafkaClientConnection.connect(nb.host, nb.port, client_id="admin")
        try:
            r = await conn.request(ListGroupsRequest(states_filter=[], types_filter=[]), 5)
            assert (r.error_code, [x.group_id for x in r.groups]) == (0, [])
            r = await conn.request(OffsetFetchRequest(group_id=WIRE_GROUP, topics=None), 7)
            assert (r.error_code, r.topics) == (0, [])
        finally:
            conn.close()
        shard, _ = nb.groups.shard_for(WIRE_GROUP)
        assert WIRE_GROUP not in shard.groups and WIRE_GROUP not in shard.consumer_groups
