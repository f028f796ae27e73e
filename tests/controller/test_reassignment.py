"""KIP-179 draft: AssignPartitions through any broker moves a partition's data to its new replicas
(real replication), leaders move off leaving brokers, leaving replicas are deleted, request ids
survive a controller failover, and PartitionAssignmentStatus reports progress in offsets."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import (InvalidPartitionsError, InvalidReplicationAssignmentError,
                          InvalidRequestError, InvalidTopicError, ReassignmentInProgressError,
                          UnknownMemberIdError)

from minibroker.client import Admin, TopicPartition
from minibroker.cluster import Cluster
from minibroker.protocol.errors import PARTITION_REASSIGNMENT_IN_PROGRESS as IN_PROGRESS
from tests.controller.test_recreated_partition import _append

pytestmark = pytest.mark.timeout(60)


async def _cluster_with(c: Cluster, topic: str, replicas: list[int], records: int) -> None:
    ctl = await c.active_controller()
    [res] = await ctl.create_topics([(topic, 1, len(replicas), {0: replicas}, {})], False)
    assert res.error_code == 0
    await c.wait_for_leaders(topic)
    await _append(c, topic, 0, records)


async def _moved(c: Cluster, topic: str, target: list[int], timeout: float = 20) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        reg = (await c.active_controller()).partition(topic, 0)
        if list(reg.replicas) == target and not reg.reassigning:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{topic}-0 did not move to {target}: {reg}")


async def test_move_copies_the_log_moves_the_leader_and_deletes_leaving_replicas():
    async with Cluster(brokers=4) as c, Admin(c.bootstrap) as admin:
        await _cluster_with(c, "t", [1, 2], 7)
        old_epoch = (await c.active_controller()).partition("t", 0).leader_epoch
        rid, results = await admin.assign_partitions({TopicPartition("t", 0): [3, 4]})
        assert rid >= 0 and list(results) == [(TopicPartition("t", 0), 3),
                                              (TopicPartition("t", 0), 4)]
        await _moved(c, "t", [3, 4])
        state = await c.partition_state("t", 0)
        assert state["leader"] in (3, 4) and state["leader_epoch"] == old_epoch + 1
        assert set(state["isr"]) == {3, 4}
        for _ in range(200):                               # StopReplica(delete) reached 1 and 2
            state = await c.partition_state("t", 0)
            if sorted(state["logs"]) == [3, 4]:
                break
            await asyncio.sleep(0.02)
        assert {b: s["log_end_offset"] for b, s in state["logs"].items()} == {3: 7, 4: 7}
        rid2, progress = await admin.partition_assignment_status(rid)
        assert rid2 == rid and progress == {(TopicPartition("t", 0), 3): (0, 8, 8),
                                            (TopicPartition("t", 0), 4): (0, 8, 8)}
        assert (await admin.partition_assignment_status())[0] == rid        # -1: the latest


async def test_progress_while_a_new_replica_is_down_then_it_catches_up():
    async with Cluster(brokers=4) as c, Admin(c.bootstrap) as admin:
        await _cluster_with(c, "t", [1, 2], 5)
        await c.stop_broker(4)                             # registered, fenced: cannot fetch
        rid, _ = await admin.assign_partitions({TopicPartition("t", 0): [2, 4]})
        await asyncio.sleep(0.2)
        _, progress = await admin.partition_assignment_status(rid)
        assert progress == {(TopicPartition("t", 0), 2): (0, 6, 6),         # already had it
                            (TopicPartition("t", 0), 4): (IN_PROGRESS, 0, 6)}
        reg = (await c.active_controller()).partition("t", 0)
        assert reg.replicas == (2, 4, 1) and reg.adding_replicas == (4,) \
            and reg.removing_replicas == (1,)
        # One at a time, as in the draft.
        with pytest.raises(ReassignmentInProgressError):
            await admin.assign_partitions({TopicPartition("t", 0): [1, 2]})
        await c.start_broker(4)
        await _moved(c, "t", [2, 4])
        _, progress = await admin.partition_assignment_status(rid)
        assert progress[(TopicPartition("t", 0), 4)] == (0, 6, 6)
        assert (await c.partition_state("t", 0))["logs"][4]["log_end_offset"] == 5


async def test_errors_per_partition_and_broker():
    async with Cluster(brokers=3) as c, Admin(c.bootstrap) as admin:
        await _cluster_with(c, "t", [1, 2], 0)
        tp = TopicPartition
        rid, results = await admin.assign_partitions({
            tp("nope", 0): [1], tp("t", 5): [1, 2], tp("t", 0): [1, 99]}, raise_on_error=False)
        assert rid == -1
        assert {k: type(e) for k, e in results.items()} == {
            (tp("nope", 0), 1): InvalidTopicError,
            (tp("t", 5), 1): InvalidPartitionsError, (tp("t", 5), 2): InvalidPartitionsError,
            (tp("t", 0), 1): InvalidReplicationAssignmentError,
            (tp("t", 0), 99): UnknownMemberIdError}
        ctl = await c.active_controller()
        for brokers in ([], [2, 2]):
            accepted = await ctl.assign_partitions([("t", 0, brokers)])
            assert {code for *_, code in accepted.results} == \
                {InvalidReplicationAssignmentError.errno}
        accepted = await ctl.assign_partitions([("t", 0, [2, 3]), ("t", 0, [3])])
        assert {code for *_, code in accepted.results} == {InvalidRequestError.errno}
        with pytest.raises(InvalidRequestError):
            await admin.partition_assignment_status(12345)
        # A new order of the same brokers moves nothing: done at once.
        rid, _ = await admin.assign_partitions({tp("t", 0): [2, 1]})
        assert (await admin.partition_assignment_status(rid))[1] == {
            (tp("t", 0), 2): (0, 1, 1), (tp("t", 0), 1): (0, 1, 1)}
        assert ctl.partition("t", 0).replicas == (2, 1)


async def test_a_running_reassignment_survives_a_controller_failover():
    async with Cluster(brokers=4) as c, Admin(c.bootstrap) as admin:
        await _cluster_with(c, "t", [1, 2], 3)
        await c.stop_broker(3)
        rid, _ = await admin.assign_partitions({TopicPartition("t", 0): [1, 3]})
        await c.stop_controller()                  # the next one replays the request
        await c.start_controller()
        assert rid in (await c.active_controller()).image.reassignments
        await c.start_broker(3)
        await _moved(c, "t", [1, 3])
        _, progress = await admin.partition_assignment_status(rid)
        assert {v[0] for v in progress.values()} == {0}


async def test_finished_requests_expire_when_the_next_is_accepted():
    async with Cluster(brokers=3, reassign_partitions_status_min_retention_ms=-1) as c, \
            Admin(c.bootstrap) as admin:
        await _cluster_with(c, "t", [1, 2], 0)
        first, _ = await admin.assign_partitions({TopicPartition("t", 0): [2, 1]})
        second, _ = await admin.assign_partitions({TopicPartition("t", 0): [1, 2]})
        assert sorted((await c.active_controller()).image.reassignments) == [second]
        with pytest.raises(InvalidRequestError):
            await admin.partition_assignment_status(first)
