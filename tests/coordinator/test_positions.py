"""KIP-253 ConsumerGroupPosition on the coordinator: validation, the interest map, reported
positions and the committed-offset floor — directly on one broker's coordinator, then over the
wire through the k1000 handler."""
from __future__ import annotations

import asyncio

import kafka.errors as Errors

from minibroker.client.group_protocol import encode_assignment
from minibroker.cluster import Cluster
from minibroker.coordinator.positions import parse_assignment
from minibroker.network.client import KafkaClientConnection
from minibroker.protocol.messages import (ConsumerGroupPositionRequest,
                                          ConsumerGroupPositionResponse)
from tests.cluster_helpers import find_coordinator
from tests.coordinator.test_classic_group import (  # noqa: F401
    GROUP, expected_ids, join, make_broker, sub, sync)

T = "t"


def cgp(b, member, generation, *parts, group=GROUP):
    """parts: (partition, need_position, position) of topic t."""
    return b.groups.positions.consumer_group_position(group, generation, member,
                                                      [(T, list(parts))] if parts else [])


async def two_members(b):
    """m1 owns t-0, m2 owns t-1; generation 2, Stable."""
    m1, m2 = expected_ids("c1", "c2")
    assert (await join(b)).error_code
    await join(b, m1)
    assert (await sync(b, m1, 1, [(m1, encode_assignment({T: [0, 1]}))])).error_code == 0
    assert (await join(b, "", "c2")).error_code
    j2 = join(b, m2, "c2")
    j1 = join(b, m1)
    assert (await j1).generation_id == 2 and (await j2).generation_id == 2
    s2 = sync(b, m2, 2)
    assert (await sync(b, m1, 2, [(m1, encode_assignment({T: [0]})),
                                  (m2, encode_assignment({T: [1]}))])).error_code == 0
    assert (await s2).error_code == 0
    return m1, m2


def test_parse_assignment():
    assert parse_assignment(encode_assignment({"a": [2, 0], "b": [1]}, b"x")) == \
        {("a", 0), ("a", 2), ("b", 1)}
    assert parse_assignment(b"") == set()
    assert parse_assignment(b"\x00\x00\x00\x00\x00\x09") == set()       # truncated


async def test_validation(broker):
    m1, m2 = await two_members(broker)
    assert broker.groups.positions.consumer_group_position("", 2, m1, []) == \
        (Errors.InvalidGroupIdError.errno, [])
    assert cgp(broker, m1, 2, group="nope") == (Errors.UnknownMemberIdError.errno, [])
    assert cgp(broker, "stranger", 2) == (Errors.UnknownMemberIdError.errno, [])
    assert cgp(broker, m1, 1) == (Errors.IllegalGenerationError.errno, [])
    assert cgp(broker, m1, 2) == (0, [])


async def test_interest_positions_and_committed_floor(broker):
    m1, m2 = await two_members(broker)
    # m2 waits on t-0 (m1's): unknown so far; m1 is told to report t-0.
    assert cgp(broker, m2, 2, (0, True, -1)) == (0, [(T, [(0, False, -1)])])
    assert cgp(broker, m1, 2) == (0, [(T, [(0, True, -1)])])
    # m1 reports; m2 reads it. A lower report later never lowers it.
    assert cgp(broker, m1, 2, (0, False, 40)) == (0, [(T, [(0, True, -1)])])
    assert cgp(broker, m2, 2, (0, True, -1)) == (0, [(T, [(0, False, 40)])])
    cgp(broker, m1, 2, (0, False, 10))
    assert cgp(broker, m2, 2, (0, True, -1)) == (0, [(T, [(0, False, 40)])])
    # A committed offset above the reports is the floor.
    codes = await broker.groups.offsets.commit_offsets(GROUP, 2, m1, None, -1,
                                                       [(T, 0, 55, -1, "", -1)])
    assert codes == {(T, 0): 0}
    assert cgp(broker, m2, 2, (0, True, -1)) == (0, [(T, [(0, False, 55)])])
    # m2 no longer interested: m1 is not asked any more.
    assert cgp(broker, m2, 2) == (0, [])
    assert cgp(broker, m1, 2) == (0, [])


async def test_rebalance_records_positions_but_answers_rebalance_in_progress(broker):
    m1, m2 = await two_members(broker)
    cgp(broker, m2, 2, (0, True, -1))
    _, _, m3 = expected_ids("c1", "c2", "c3")
    assert (await join(broker, "", "c3")).error_code
    join(broker, m3, "c3")                                  # a new member: PreparingRebalance
    await asyncio.sleep(0)
    assert cgp(broker, m1, 2, (0, False, 7)) == (Errors.RebalanceInProgressError.errno, [])
    assert broker.groups.positions.state(
        broker.groups.shards[0].groups[GROUP]).positions == {(T, 0): 7}


async def test_over_the_wire():
    async with Cluster(brokers=1, group_initial_rebalance_delay_ms=0,
                       offsets_topic_num_partitions=1) as c:
        await c.create_topic(T, 2, 1)
        b = c.brokers[1]
        conn = await KafkaClientConnection.connect(b.host, b.port, client_id="cli")
        try:
            R = ConsumerGroupPositionRequest
            req = R(group_id="nobody", generation_id=1, member_id="m", topics=[
                R.ConsumerGroupPositionRequestTopic(topic=T, partitions=[
                    R.ConsumerGroupPositionRequestTopic.ConsumerGroupPositionRequestPartition(
                        partition=0, need_position=True, position=-1)])])
            resp = await conn.request(req, 0, response_class=ConsumerGroupPositionResponse)
            # No __consumer_offsets yet: nobody coordinates the group.
            assert resp.error_code == Errors.NotCoordinatorError.errno and resp.topics == []
            await find_coordinator(conn, "nobody")
            for _ in range(200):
                resp = await conn.request(req, 0, response_class=ConsumerGroupPositionResponse)
                if resp.error_code != Errors.CoordinatorLoadInProgressError.errno:
                    break
                await asyncio.sleep(0.05)
            assert resp.error_code == Errors.UnknownMemberIdError.errno and resp.topics == []
        finally:
            conn.close()


def test_subscription_helper_is_consumer_protocol():
    assert sub("t")[:2] == b"\x00\x00"
