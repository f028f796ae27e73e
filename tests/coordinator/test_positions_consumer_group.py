"""KIP-253 ConsumerGroupPosition (key 1000) for members of KIP-848 consumer groups: GenerationId is
the member epoch, the partitions a member owns are its current assignment plus those pending
revocation; errors as Kafka's OffsetCommit/OffsetFetch checks of a consumer group member."""
from __future__ import annotations

import asyncio

import kafka.errors as Errors

from minibroker.cluster import Cluster
from minibroker.coordinator.group import consumer_group as C
from minibroker.coordinator.group import consumer_group_records as R
from minibroker.network.client import KafkaClientConnection
from minibroker.protocol.messages import (ConsumerGroupHeartbeatRequest,
                                          ConsumerGroupPositionRequest,
                                          ConsumerGroupPositionResponse)
from tests.cluster_helpers import find_coordinator
from tests.coordinator.test_consumer_group import GROUP, T, make_broker, group, hb  # noqa: F401

STALE_MEMBER_EPOCH = Errors.StaleMemberEpochError.errno
UNKNOWN_MEMBER_ID = Errors.UnknownMemberIdError.errno


def cgp(b, member, epoch, *parts, group=GROUP):
    """parts: (partition, need_position, position) of topic t."""
    return b.groups.positions.consumer_group_position(group, epoch, member,
                                                      [("t", list(parts))] if parts else [])


async def test_member_epoch_identity_and_owned_partitions(broker):
    await hb(broker, "m1", 0)                                   # m1: t-0, t-1 at epoch 1
    assert (await hb(broker, "m2", 0)).member_epoch == 2        # m2 waits for t-1
    assert (await hb(broker, "m1", 1)).member_epoch == 1        # m1 must revoke t-1
    m1 = group(broker).members["m1"]
    assert (m1.state, m1.partitions_pending_revocation) == (C.UNREVOKED_PARTITIONS,
                                                             {T: frozenset({1})})
    assert broker.groups.positions.consumer_group_position("", 2, "m2", []) == \
        (Errors.InvalidGroupIdError.errno, [])
    assert cgp(broker, "m2", 2, group="nope") == (UNKNOWN_MEMBER_ID, [])
    assert cgp(broker, "stranger", 2) == (UNKNOWN_MEMBER_ID, [])
    assert cgp(broker, "m2", 1) == (STALE_MEMBER_EPOCH, [])
    assert cgp(broker, "m1", 2) == (STALE_MEMBER_EPOCH, [])
    # m2 waits on t-1, which m1 still owns while revoking it: m1 is asked for it.
    assert cgp(broker, "m2", 2, (1, True, -1)) == (0, [("t", [(1, False, -1)])])
    assert cgp(broker, "m1", 1) == (0, [("t", [(1, True, -1)])])
    assert cgp(broker, "m1", 1, (1, False, 40)) == (0, [("t", [(1, True, -1)])])
    assert cgp(broker, "m2", 2, (1, True, -1)) == (0, [("t", [(1, False, 40)])])

    # m1 revokes, m2 takes t-1; now m1 waits on t-1 and m2 is asked for it.
    assert (await hb(broker, "m1", 1, owned={T: [0]})).member_epoch == 2
    assert (await hb(broker, "m2", 2)).assignment is not None
    assert cgp(broker, "m2", 2) == (0, [])                       # m2 no longer interested
    assert cgp(broker, "m1", 2, (1, True, -1)) == (0, [("t", [(1, False, 40)])])
    assert cgp(broker, "m2", 2) == (0, [("t", [(1, True, -1)])])
    # The committed offset (kept in the group's offset holder) is the floor.
    codes = await broker.groups.offsets.commit_offsets(GROUP, 2, "m2", None, -1,
                                                       [("t", 1, 55, -1, "", -1)])
    assert codes == {("t", 1): 0}
    assert cgp(broker, "m1", 2, (1, True, -1)) == (0, [("t", [(1, False, 55)])])
    # A member that left is unknown, and its interest goes with it.
    assert (await hb(broker, "m1", -1)).error_code == 0
    assert cgp(broker, "m1", 2) == (UNKNOWN_MEMBER_ID, [])
    assert cgp(broker, "m2", 2) == (0, [])                       # not asked for t-1 any more


async def test_over_the_wire_for_a_consumer_group_member():
    async with Cluster(brokers=1, offsets_topic_num_partitions=1) as c:
        await c.create_topic("t", 2, 1)
        b = c.brokers[1]
        conn = await KafkaClientConnection.connect(b.host, b.port, client_id="cli")
        try:
            await find_coordinator(conn, "g")
            for _ in range(200):
                hr = await conn.request(ConsumerGroupHeartbeatRequest(
                    group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=30_000,
                    subscribed_topic_names=["t"], topic_partitions=[]), 1)
                if hr.error_code != Errors.CoordinatorLoadInProgressError.errno:
                    break
                await asyncio.sleep(0.05)
            assert (hr.error_code, hr.member_epoch) == (0, 1)
            R = ConsumerGroupPositionRequest
            P = R.ConsumerGroupPositionRequestTopic.ConsumerGroupPositionRequestPartition
            req = R(group_id="g", generation_id=1, member_id="m1", topics=[
                R.ConsumerGroupPositionRequestTopic(topic="t", partitions=[
                    P(partition=0, need_position=True, position=-1)])])
            resp = await conn.request(req, 0, response_class=ConsumerGroupPositionResponse)
            assert resp.error_code == 0
            assert [(t.topic, [(p.partition, p.need_position, p.position) for p in t.partitions])
                    for t in resp.topics] == [("t", [(0, False, -1)])]   # nobody else asks
        finally:
            conn.close()
