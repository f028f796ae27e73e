"""KIP-179 / KIP-455 reassignment planning and completion as pure functions: images built from
records, no cluster, no event loop (the progress poll alone is async, fed log bounds by the test).
The reassignment on a running cluster is in test_reassignment.py and test_reassignment_kip455.py."""
from __future__ import annotations

import pytest

from minibroker.controller import records
from minibroker.controller.image import Reassignment
from minibroker.controller.partitions import alter_partition
from minibroker.controller.reassignment import (INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT,
                                                INVALID_REPLICATION_FACTOR, INVALID_REQUEST,
                                                INVALID_TOPIC, NO_REASSIGNMENT_IN_PROGRESS,
                                                REASSIGNMENT_IN_PROGRESS,
                                                UNKNOWN_MEMBER_ID, UNKNOWN_TOPIC_OR_PARTITION,
                                                Accepted, completion_records, ongoing, plan,
                                                plan_alter, request)
from minibroker.controller.reassignment_progress import IN_PROGRESS, Progress, progress
from minibroker.controller.result import Result
from tests.controller.images import A, brokers, replay, topic

NOW, RETENTION = 10_000, 60_000


def _image():
    return replay(brokers(1, 2, 3, 4) + topic("a", A, {0: (1, 2), 1: (2, 3)}))


def _moved_to_34():
    """a-0 moving from (1, 2) to (3, 4); returns (image, request id)."""
    image = _image()
    res = plan(image, [("a", 0, [3, 4])], NOW, RETENTION)
    return replay(res.records, image), res.response.request_id


def test_plan_starts_a_move_with_adding_and_removing_replicas():
    image = _image()
    res = plan(image, [("a", 0, [3, 4])], NOW, RETENTION)
    rid = image.offset + 1
    assert res == Result((
        records.partition_reassignment(NOW, [], [(A, 0, (3, 4), (1, 2))]),
        records.partition_change(A, 0, replicas=(3, 4, 1, 2), adding=[3, 4], removing=[1, 2])),
        Accepted(0, None, rid, [("a", 0, 3, 0), ("a", 0, 4, 0)]))
    after = replay(res.records, image)
    assert after.reassignments[rid] == Reassignment(rid, NOW, {(A, 0): ((3, 4), (1, 2))})
    assert dict(after.moving) == {(A, 0): rid}
    p = after.topics["a"].partitions[0]
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == \
        ((3, 4, 1, 2), (1, 2), 1, (3, 4), (1, 2))
    assert ongoing(after, None) == [("a", 0, p)] and ongoing(after, {"a": [1]}) == []
    assert request(after, -1) is after.reassignments[rid] is request(after, rid)


def test_completion_waits_for_every_target_replica_in_the_isr_then_moves_leadership():
    image, rid = _moved_to_34()
    assert completion_records(image) == []
    p = image.topics["a"].partitions[0]
    half = replay(alter_partition(image, 1, "a", 0, p.leader_epoch, p.partition_epoch,
                                  (1, 2, 3)).records, image)
    assert completion_records(half) == []                    # 4 has not joined yet
    p = half.topics["a"].partitions[0]
    joined = replay(alter_partition(half, 1, "a", 0, p.leader_epoch, p.partition_epoch,
                                    (1, 2, 3, 4)).records, half)
    done = completion_records(joined)
    assert done == [records.partition_change(A, 0, replicas=[3, 4], isr=[3, 4], adding=[],
                                             removing=[], leader=3)]
    after = replay(done, joined)
    p = after.topics["a"].partitions[0]
    assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.reassigning) == \
        ((3, 4), (3, 4), 3, 1, False)
    ra = after.reassignments[rid]
    assert ra.done == {(A, 0)} and ra.complete and dict(after.moving) == {}


def test_a_new_order_of_the_same_replicas_is_done_at_once():
    image = _image()
    res = plan(image, [("a", 0, [2, 1])], NOW, RETENTION)
    assert res.records[1:] == (records.partition_change(A, 0, replicas=(2, 1)),)
    after = replay(res.records, image)
    assert after.topics["a"].partitions[0].replicas == (2, 1) and dict(after.moving) == {}
    assert after.reassignments[res.response.request_id].complete


def test_plan_errors_per_partition_and_broker():
    image = _image()

    def codes(*assignments):
        res = plan(image, list(assignments), NOW, RETENTION)
        assert res.records == () and res.response.error_code == 0
        return res.response.results

    assert codes(("zz", 0, [1])) == [("zz", 0, 1, INVALID_TOPIC)]
    assert codes(("a", 7, [1, 2])) == [("a", 7, 1, INVALID_PARTITIONS),
                                       ("a", 7, 2, INVALID_PARTITIONS)]
    assert codes(("a", 1, [])) == [("a", 1, -1, INVALID_REPLICA_ASSIGNMENT)]
    assert codes(("a", 1, [3, 3])) == [("a", 1, 3, INVALID_REPLICA_ASSIGNMENT)] * 2
    assert codes(("a", 0, [1, 9])) == [("a", 0, 1, INVALID_REPLICA_ASSIGNMENT),
                                       ("a", 0, 9, UNKNOWN_MEMBER_ID)]
    assert codes(("a", 0, [3]), ("a", 0, [4])) == [("a", 0, 3, INVALID_REQUEST),
                                                   ("a", 0, 4, INVALID_REQUEST)]


def test_plan_starts_the_valid_items_of_a_request_with_invalid_ones():
    image = _image()
    res = plan(image, [("zz", 0, [1]), ("a", 1, [4, 1])], NOW, RETENTION)
    assert res.response == Accepted(0, None, image.offset + 1,
                                    [("zz", 0, 1, INVALID_TOPIC), ("a", 1, 4, 0), ("a", 1, 1, 0)])
    after = replay(res.records, image)
    assert after.reassignments[res.response.request_id].partitions == {(A, 1): ((4, 1), (2, 3))}


def test_one_reassignment_at_a_time():
    image, rid = _moved_to_34()
    assert plan(image, [("a", 1, [1, 4])], NOW, RETENTION) == Result((), Accepted(
        REASSIGNMENT_IN_PROGRESS, f"Reassignment {rid} is still running.", -1,
        [("a", 1, 1, REASSIGNMENT_IN_PROGRESS), ("a", 1, 4, REASSIGNMENT_IN_PROGRESS)]))
    assert plan_alter(image, [("a", 1, [1, 4])], NOW, RETENTION, False) == Result(
        (), [("a", 1, REASSIGNMENT_IN_PROGRESS, f"Reassignment {rid} is still running.")])


def test_completed_requests_expire_with_the_next_accepted_one():
    image = _image()
    first = plan(image, [("a", 0, [2, 1])], NOW, RETENTION)
    image = replay(first.records, image)
    rid = first.response.request_id
    kept = plan(image, [("a", 1, [3, 2])], NOW + RETENTION, RETENTION)
    assert kept.records[0] == records.partition_reassignment(NOW + RETENTION, [],
                                                             [(A, 1, (3, 2), (2, 3))])
    later = plan(image, [("a", 1, [3, 2])], NOW + RETENTION + 1, RETENTION)
    assert later.records[0].expired_request_ids == [rid]
    assert sorted(replay(later.records, image).reassignments) == [later.response.request_id]


def test_alter_partition_reassignments_cancel_goes_back_to_the_original_replicas():
    image, rid = _moved_to_34()
    res = plan_alter(image, [("a", 0, None)], NOW, RETENTION, False)
    assert res == Result((records.partition_change(A, 0, replicas=[1, 2], isr=[1, 2], adding=[],
                                                   removing=[]),), [("a", 0, 0, None)])
    after = replay(res.records, image)
    p = after.topics["a"].partitions[0]
    assert (p.replicas, p.isr, p.leader, p.reassigning) == ((1, 2), (1, 2), 1, False)
    assert after.reassignments[rid].cancelled == {(A, 0)} and dict(after.moving) == {}


def test_alter_partition_reassignments_errors():
    image = _image()
    res = plan_alter(image, [("zz", 0, [1, 2]), ("a", 9, None), ("a", 0, None),
                             ("a", 0, [1, 1]), ("a", 0, [1, 9]), ("a", 1, [1, 2, 4])],
                     NOW, RETENTION, allow_rf_change=False)
    assert res == Result((), [
        ("zz", 0, UNKNOWN_TOPIC_OR_PARTITION, None), ("a", 9, UNKNOWN_TOPIC_OR_PARTITION, None),
        ("a", 0, NO_REASSIGNMENT_IN_PROGRESS, None),
        ("a", 0, INVALID_REPLICA_ASSIGNMENT, "Invalid replica list [1, 1]."),
        ("a", 0, INVALID_REPLICA_ASSIGNMENT, "Invalid replica list [1, 9]."),
        ("a", 1, INVALID_REPLICATION_FACTOR, None)])
    grow = plan_alter(image, [("a", 1, [1, 2, 4])], NOW, RETENTION, allow_rf_change=True)
    assert grow.response == [("a", 1, 0, None)]
    after = replay(grow.records, image)
    assert after.topics["a"].partitions[1].adding_replicas == (1, 4)


@pytest.mark.parametrize("deleted", [False, True])
async def test_progress_counts_offsets_each_new_replica_holds(deleted):
    image, rid = _moved_to_34()
    p = image.topics["a"].partitions[0]
    image = replay(alter_partition(image, 1, "a", 0, p.leader_epoch, p.partition_epoch,
                                   (1, 2, 3)).records, image)
    if deleted:
        image = replay([records.remove_topic(A)], image)
    bounds = {1: (10, 50), 3: (0, 50), 4: (0, 25)}       # leader 1 holds offsets 10..49

    async def log_bounds(broker_id, topic, partition):
        assert (topic, partition) == ("a", 0)
        return bounds.get(broker_id, (None, None))

    out = await progress(image, image.reassignments[rid], log_bounds)
    if deleted:
        # The topic's name is gone with it: the id stands in.
        assert out == [Progress(str(A), 0, b, UNKNOWN_TOPIC_OR_PARTITION, 0, -1) for b in (3, 4)]
    else:
        assert out == [Progress("a", 0, 3, IN_PROGRESS, 40 + 1, 41),      # all of it, in ISR
                       Progress("a", 0, 4, IN_PROGRESS, 15, 41)]
