"""ElectLeaders as a controller operation (controller/elections.py): preferred and unclean
elections over a frozen image; then over the wire (ElectLeaders v2) on a running cluster."""
from __future__ import annotations

import asyncio

import kafka.errors as Errors
import pytest
from kafka.protocol.admin import ElectLeadersRequest

from minibroker.cluster import Cluster
from minibroker.controller import records
from minibroker.controller.brokers import fence_broker
from minibroker.controller.elections import PREFERRED, UNCLEAN, elect_leaders
from minibroker.controller.partitions import elect_leader
from minibroker.network.client import KafkaClientConnection
from tests.controller.images import A, brokers, replay, topic

NOT_NEEDED = Errors.ElectionNotNeededError.errno


def _image():
    # a-0: replicas (1, 2), a-1: (2, 3), a-2: (3,)
    return replay(brokers(1, 2, 3) + topic("a", A, {0: (1, 2), 1: (2, 3), 2: (3,)}))


def codes(res):
    return [(t, p, code) for t, p, code, _ in res.response]


def test_preferred_election():
    image = _image()
    moved = replay(elect_leader(image, "a", 0, 2).records, image)     # a-0 led by 2 now
    res = elect_leaders(moved, PREFERRED, [("a", 0), ("a", 1), ("a", 9), ("b", 0)])
    assert res.records == (records.partition_change(A, 0, leader=1),)
    assert codes(res) == [("a", 0, 0), ("a", 1, NOT_NEEDED),
                          ("a", 9, Errors.UnknownTopicOrPartitionError.errno),
                          ("b", 0, Errors.UnknownTopicOrPartitionError.errno)]
    # all partitions: only those that need an election are answered
    assert codes(elect_leaders(moved, PREFERRED, None)) == [("a", 0, 0)]
    # the preferred replica out of the ISR (fenced): not available
    fenced = replay(fence_broker(moved, 1).records, moved)
    res = elect_leaders(fenced, PREFERRED, [("a", 0)])
    assert codes(res) == [("a", 0, Errors.PreferredLeaderNotAvailableError.errno)]
    assert res.response[0][3] == ("Failed to elect leader for partition a-0 under strategy "
                                  "PreferredReplicaPartitionLeaderElectionStrategy")


def test_unclean_election_takes_a_live_replica_out_of_the_isr():
    image = _image()
    # a-0 (1, 2): fencing 2 then 1 leaves it leaderless with ISR (1); 2 comes back unfenced
    image = replay(fence_broker(image, 2).records, image)
    image = replay(fence_broker(image, 1).records, image)
    p = image.topics["a"].partitions[0]
    assert p.leader == -1 and p.isr == (1,)
    back = replay((records.unfence_broker(2, image.brokers[2].broker_epoch),), image)
    res = elect_leaders(back, UNCLEAN, [("a", 0), ("a", 2)])
    assert codes(res) == [("a", 0, 0), ("a", 2, NOT_NEEDED)]
    assert res.records == (records.partition_change(A, 0, leader=2, isr=[2]),)
    # nobody alive: not available
    res = elect_leaders(image, UNCLEAN, [("a", 0)])
    assert codes(res) == [("a", 0, Errors.EligibleLeadersNotAvailableError.errno)]


@pytest.mark.timeout(60)
async def test_elect_leaders_over_the_wire():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 2, 3)
        preferred = [(await c.partition_state("t", i))["replicas"][0] for i in (0, 1)]
        other = next(b for b in (1, 2, 3) if b != preferred[0])
        await c.move_leader("t", 0, other)
        assert await c.leader_of("t", 0) == other
        b = c.brokers[1]
        conn = await KafkaClientConnection.connect(b.host, b.port)
        T = ElectLeadersRequest.TopicPartitions
        resp = await conn.request(ElectLeadersRequest(
            election_type=PREFERRED, topic_partitions=[T(topic="t", partitions=[0, 1])],
            timeout_ms=5000), 2)
        assert resp.error_code == 0
        [result] = resp.replica_election_results
        assert result.topic == "t"
        assert [(r.partition_id, r.error_code) for r in result.partition_result] == [
            (0, 0), (1, NOT_NEEDED)]
        assert await c.leader_of("t", 0) == preferred[0]
        resp = await conn.request(ElectLeadersRequest(
            election_type=PREFERRED, topic_partitions=None, timeout_ms=5000), 0)
        assert resp.replica_election_results == []      # nothing needs an election now
        conn.close()


def test_imbalanced_partitions_past_the_per_broker_percentage():
    """Kafka's checkAndTriggerAutoLeaderRebalance: per preferred broker, the share of its
    partitions led by another; past the percentage, those it can lead (alive, in the ISR)."""
    from minibroker.controller.elections import imbalanced_partitions
    # 1 is preferred for a-0..a-3, 2 for a-4
    image = replay(brokers(1, 2, 3) + topic("a", A, {0: (1, 2), 1: (1, 2), 2: (1, 2),
                                                     3: (1, 2), 4: (2, 1)}))
    assert imbalanced_partitions(image, 10) == []
    moved = replay(elect_leader(image, "a", 0, 2).records, image)      # 1 of 4: 25%
    assert imbalanced_partitions(moved, 10) == [("a", 0)]
    assert imbalanced_partitions(moved, 25) == []                       # not past 25%
    moved = replay(elect_leader(moved, "a", 4, 1).records, moved)      # 2's only one: 100%
    assert imbalanced_partitions(moved, 25) == [("a", 4)]
    # the preferred replica fenced (not alive, out of the ISR): nothing to move to it
    fenced = replay(fence_broker(moved, 1).records, moved)
    assert imbalanced_partitions(fenced, 10) == []


@pytest.mark.timeout(120)
async def test_leaders_return_to_their_preferred_replicas_after_a_restart():
    """auto.leader.rebalance.enable: after broker 1 stops (its partitions led by others) and
    starts again, leadership goes back to it within leader.imbalance.check.interval.seconds
    once it is in the ISR; without it, leadership stays where the stop put it."""
    for enabled in (True, False):
        async with Cluster(brokers=3, auto_leader_rebalance_enable=enabled,
                           leader_imbalance_check_interval_seconds=5) as c:
            await c.create_topic("t", 6, 3)
            preferred = {p: c.controller.image.topics["t"].partitions[p].replicas[0]
                         for p in range(6)}
            assert {p: await c.leader_of("t", p) for p in range(6)} == preferred
            await c.stop_broker(1)
            await c.start_broker(1)
            for _ in range(100):        # back in every ISR
                if all(1 in c.controller.image.topics["t"].partitions[p].isr for p in range(6)):
                    break
                await asyncio.sleep(0.1)
            started = asyncio.get_running_loop().time()
            await asyncio.sleep(6)      # one interval and a bit
            leaders = {p: c.controller.image.topics["t"].partitions[p].leader for p in range(6)}
            if enabled:
                assert leaders == preferred, f"after {loop_time(started):.1f} s"
            else:
                assert all(leaders[p] != 1 for p in range(6))


def loop_time(since: float) -> float:
    return asyncio.get_running_loop().time() - since
