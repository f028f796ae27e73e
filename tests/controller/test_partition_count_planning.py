"""KIP-253 planning as pure functions (CreatePartitions expansion, deletion by marking, resume
after a controller stop, removal of drained partitions): images built from records, no cluster,
no event loop. The procedures on a running cluster are in test_partition_count.py."""
from __future__ import annotations

import kafka.errors as Errors

from minibroker.controller import records
from minibroker.controller.image import PartitionRegistration
from minibroker.controller.partition_count import (change_partition_count, marked_partitions,
                                                   remove_partition, resume_records)
from minibroker.controller.placement import assign_replicas
from minibroker.controller.result import ItemResult, Result
from minibroker.ids import IdSource
from tests.controller.images import A, brokers, replay, topic

BROKERS = brokers(1, 2, 3)
ALIVE = {1, 2, 3}
OK = ItemResult(0)


def _image(*extra, configs=None):
    return replay(BROKERS + topic("a", A, {0: (1, 2), 1: (2, 3)}, configs) + list(extra))


def test_expansion_is_two_steps_bumping_epochs_then_creating_with_after_creation():
    image = _image()
    res = change_partition_count(image, "a", 4, [[3, 1], [1, 2]], IdSource(1))
    pre_bump = ((0, 0), (1, 0))
    step1 = (records.partition_count(A, 2, 4, pre_bump),
             records.partition_change(A, 0, leader_epoch=1),
             records.partition_change(A, 1, leader_epoch=1))
    step2 = tuple(records.partitions(A, {2: (3, 1), 3: (1, 2)}, ALIVE, pre_bump))
    assert res == Result(step1 + step2, OK, (step1, step2))

    t = replay(res.records, image).topics["a"]
    assert (t.initial_partition_count, t.undeleted_partition_count) == (2, 4)
    assert t.pending_after_creation == ()            # every new partition exists
    assert dict(t.partitions) == {
        0: PartitionRegistration((1, 2), (1, 2), 1, leader_epoch=1, partition_epoch=1),
        1: PartitionRegistration((2, 3), (2, 3), 2, leader_epoch=1, partition_epoch=1),
        2: PartitionRegistration((3, 1), (3, 1), 3, 0, 0, leader_epoch_after_creation=pre_bump),
        3: PartitionRegistration((1, 2), (1, 2), 1, 0, 0, leader_epoch_after_creation=pre_bump)}


def test_expansion_places_new_partitions_with_the_topics_replication_factor():
    image = _image()
    res = change_partition_count(image, "a", 5, None, IdSource(2))
    expected = assign_replicas(image.live_brokers(), 2, 3, 2, IdSource(2).rng)
    t = replay(res.records, image).topics["a"]
    assert {p: t.partitions[p].replicas for p in (2, 3, 4)} == expected


def test_expansion_without_ordered_delivery_bumps_nothing():
    image = _image(configs={"enable.ordered.delivery": "false"})
    res = change_partition_count(image, "a", 3, [[2]], IdSource(1))
    step1 = (records.partition_count(A, 2, 3),)
    step2 = tuple(records.partitions(A, {2: (2,)}, ALIVE))
    assert res == Result(step1 + step2, OK, (step1, step2))
    t = replay(res.records, image).topics["a"]
    assert [t.partitions[p].leader_epoch for p in range(3)] == [0, 0, 0]
    assert t.partitions[2].leader_epoch_after_creation == ()


def test_deletion_marks_partitions_above_the_count_and_bumps_the_survivors():
    image = _image()
    image = replay(change_partition_count(image, "a", 4, [[3, 1], [1, 2]], IdSource(1)).records,
                   image)
    res = change_partition_count(image, "a", 2, None, IdSource(1))
    before = ((0, 1), (1, 1))
    step1 = (records.partition_count(A, 2, 2),)
    step2 = (records.partition_change(A, 2, before_deletion=before),
             records.partition_change(A, 3, before_deletion=before),
             records.partition_change(A, 0, leader_epoch=2),
             records.partition_change(A, 1, leader_epoch=2))
    assert res == Result(step1 + step2, OK, (step1, step2))

    after = replay(res.records, image)
    t = after.topics["a"]
    assert t.undeleted_partition_count == 2 and sorted(t.partitions) == [0, 1, 2, 3]
    assert [t.partitions[p].leader_epoch for p in range(4)] == [2, 2, 0, 0]
    assert [t.partitions[p].marked_for_deletion for p in range(4)] == [False, False, True, True]
    assert t.partitions[3].leader_epoch_before_deletion == before
    assert marked_partitions(after) == [("a", 2, 3), ("a", 3, 1)]


def test_partition_count_errors_write_nothing():
    image = _image()
    grown = replay(change_partition_count(image, "a", 4, [[3], [1]], IdSource(1)).records, image)
    marked = replay(change_partition_count(grown, "a", 3, None, IdSource(1)).records, grown)
    unordered = _image(configs={"enable.ordered.delivery": "false"})
    wide = replay(topic("w", A, {0: (1, 2, 3)}), replay(brokers(1, 2)))
    cases = [
        (image, "zz", 3, None, Errors.UnknownTopicOrPartitionError, "Topic zz does not exist"),
        (image, "a", 2, None, Errors.InvalidPartitionsError, "Topic already has 2 partitions."),
        (image, "a", 4, [[1]], Errors.InvalidReplicationAssignmentError,
         "Increasing the number of partitions by 2 but 1 assignments provided."),
        (grown, "a", 1, None, Errors.InvalidPartitionsError,
         "Topic a was created with 2 partitions and cannot shrink below that (asked for 1)"),
        (marked, "a", 5, None, Errors.InvalidPartitionsError,
         "Topic a has partitions [3] marked for deletion; expansion is refused until they are "
         "removed (KIP-253)"),
        (marked, "a", 2, None, Errors.InvalidPartitionsError,
         "Topic a is still removing partitions [3] after an earlier shrink; try again once "
         "they are gone"),
        (unordered, "a", 1, None, Errors.InvalidPartitionsError,
         "Topic currently has 2 partitions, 1 would not be an increase "
         "(enable.ordered.delivery=false)."),
        (wide, "w", 2, None, Errors.InvalidPartitionsError,
         "Replication factor 3 larger than available brokers"),
    ]
    for img, name, count, assignments, error, message in cases:
        assert change_partition_count(img, name, count, assignments, IdSource(1)) == \
            Result((), ItemResult(error.errno, message)), (name, count)


def test_resume_finishes_an_expansion_stopped_after_its_first_step():
    image = _image()
    res = change_partition_count(image, "a", 4, None, IdSource(1))
    half = replay(res.steps[0], image)
    assert half.topics["a"].pending_after_creation == ((0, 0), (1, 0))
    out = resume_records(half, IdSource(7))
    expected = assign_replicas(half.live_brokers(), 2, 2, 2, IdSource(7).rng)
    assert out == records.partitions(A, expected, ALIVE, ((0, 0), (1, 0)))
    t = replay(out, half).topics["a"]
    assert sorted(t.partitions) == [0, 1, 2, 3] and t.pending_after_creation == ()
    assert resume_records(replay(out, half), IdSource(7)) == []


def test_resume_finishes_a_deletion_stopped_after_its_first_step():
    image = _image()
    grown = replay(change_partition_count(image, "a", 4, [[3], [1]], IdSource(1)).records, image)
    res = change_partition_count(grown, "a", 2, None, IdSource(1))
    half = replay(res.steps[0], grown)
    assert resume_records(half, IdSource(1)) == list(res.steps[1])
    assert resume_records(replay(res.steps[1], half), IdSource(1)) == []


def test_removing_drained_partitions_then_recreating_an_index_starts_above_its_epochs():
    image = _image()
    grown = replay(change_partition_count(image, "a", 4, [[3], [1]], IdSource(1)).records, image)
    marked = replay(change_partition_count(grown, "a", 2, None, IdSource(1)).records, grown)
    res = remove_partition(marked, "a", 2)
    assert res == Result((records.remove_partition(A, 2),), True)
    after = replay(res.records, marked)
    assert remove_partition(after, "a", 2) == Result((), False)
    assert remove_partition(after, "zz", 0) == Result((), False)
    after = replay(remove_partition(after, "a", 3).records, after)
    t = after.topics["a"]
    assert sorted(t.partitions) == [0, 1] and t.removed_leader_epochs == ((2, 0), (3, 0))
    assert marked_partitions(after) == []

    again = replay(change_partition_count(after, "a", 3, [[2]], IdSource(1)).records, after)
    assert again.topics["a"].partitions[2].leader_epoch == 1         # above the removed one's 0
