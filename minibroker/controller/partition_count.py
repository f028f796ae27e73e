"""KIP-253: changing a topic's partition count — expansion, and deletion by marking.

Pure planning: functions of the frozen image returning records; the controller appends them.

Expansion (count > undeleted count), the seed's part 2, as two log steps:
  1. TopicPartitionCountRecord(new count, the pre-bump leader epochs) and a leader-epoch bump of
     every existing partition;
  2. PartitionRecords for the new partitions with leaderEpochAfterCreation = those epochs.
Deletion (initial count <= count < undeleted count), part 3:
  1. TopicPartitionCountRecord(new count);
  2. partitions >= count get leaderEpochBeforeDeletion (survivor → its current epoch) and every
     survivor's leader epoch is bumped.
Propagation happens once, after the last step: LeaderAndIsr (new epochs + count) reaches every
broker before UpdateMetadata, so a client can only learn a count its leaders already enforce.
A controller that stops between steps leaves step 1 in the log; the next controller finds it on
replay and finishes (resume_records). Drained marked partitions (log start offset == end
offset, by retention or DeleteRecords) are removed by a controller task, partition_removal.py
(StopReplica delete=true).
With enable.ordered.delivery=false the epoch steps are skipped and shrinking is refused.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

from kafka.errors import (InvalidPartitionsError, InvalidReplicationAssignmentError,
                          PolicyViolationError, UnknownTopicOrPartitionError)

from minibroker.controller import records
from minibroker.controller.image import MetadataImage, TopicImage
from minibroker.controller.placement import assign_replicas
from minibroker.controller.result import ItemResult, Result
from minibroker.controller.topics import EXCESSIVE_PARTITIONS, MAX_PARTITIONS_PER_BATCH
from minibroker.ids import IdSource

if TYPE_CHECKING:
    from minibroker.protocol import records as R

log = logging.getLogger("minibroker.controller")


def ordered_delivery(topic: TopicImage) -> bool:
    return topic.configs.get("enable.ordered.delivery", "true").lower() != "false"


def _count_record(t: TopicImage, count: int, pending: records.Epochs = ()
                  ) -> R.TopicPartitionCountRecord:
    return records.partition_count(t.topic_id, t.initial_partition_count, count, pending)


def change_partition_count(image: MetadataImage, name: str, count: int,
                           assignments: Sequence[Sequence[int]] | None,
                           ids: IdSource) -> Result[ItemResult]:
    """CreatePartitions: the two log steps above, or no records and the error."""
    t = image.topics.get(name)
    if t is None:
        return _refused(UnknownTopicOrPartitionError.errno, f"Topic {name} does not exist")
    undeleted = t.undeleted_partition_count
    marked = sorted(p for p, reg in t.partitions.items() if reg.marked_for_deletion)
    if count == undeleted:
        return _refused(InvalidPartitionsError.errno, f"Topic already has {undeleted} partitions.")
    if count - undeleted > MAX_PARTITIONS_PER_BATCH:
        return _refused(PolicyViolationError.errno, EXCESSIVE_PARTITIONS)
    if count > undeleted:
        if marked:
            return _refused(InvalidPartitionsError.errno,
                            f"Topic {name} has partitions {marked} marked for deletion; "
                            "expansion is refused until they are removed (KIP-253)")
        return _expansion(image, t, count, assignments, ids)
    if not ordered_delivery(t):
        return _refused(InvalidPartitionsError.errno,
                        f"Topic currently has {undeleted} partitions, {count} would not be "
                        "an increase (enable.ordered.delivery=false).")
    if count < t.initial_partition_count:
        return _refused(InvalidPartitionsError.errno,
                        f"Topic {name} was created with {t.initial_partition_count} "
                        f"partitions and cannot shrink below that (asked for {count})")
    if marked:
        return _refused(InvalidPartitionsError.errno,
                        f"Topic {name} is still removing partitions {marked} after an "
                        "earlier shrink; try again once they are gone")
    return Result.in_steps([[_count_record(t, count)], _deletion_marks(t, count)], ItemResult(0))


def _refused(error_code: int, message: str) -> Result[ItemResult]:
    return Result((), ItemResult(error_code, message))


def _expansion(image: MetadataImage, t: TopicImage, count: int,
               assignments: Sequence[Sequence[int]] | None, ids: IdSource) -> Result[ItemResult]:
    first = len(t.partitions)
    live = image.live_brokers()
    rf = len(next(iter(t.partitions.values())).replicas)
    if assignments:
        if len(assignments) != count - first:
            return _refused(InvalidReplicationAssignmentError.errno,
                            f"Increasing the number of partitions by {count - first} but "
                            f"{len(assignments)} assignments provided.")
        new = {first + i: tuple(a) for i, a in enumerate(assignments)}
    else:
        if rf > len(live):
            return _refused(InvalidPartitionsError.errno,
                            f"Replication factor {rf} larger than available brokers")
        new = assign_replicas(live, first, count - first, rf, ids.rng)
    alive = {b.broker_id for b in live}
    if not ordered_delivery(t):
        steps = [[_count_record(t, count)],
                 records.partitions(t.topic_id, new, alive, (), t.removed_leader_epochs)]
        return Result.in_steps(steps, ItemResult(0))
    pre_bump = tuple(sorted((p, reg.leader_epoch) for p, reg in t.partitions.items()))
    step1 = [_count_record(t, count, pre_bump)]
    step1 += [records.partition_change(t.topic_id, p, leader_epoch=e + 1) for p, e in pre_bump]
    step2 = records.partitions(t.topic_id, new, alive, pre_bump, t.removed_leader_epochs)
    return Result.in_steps([step1, step2], ItemResult(0))


def _deletion_marks(t: TopicImage, count: int) -> list[R.PartitionChangeRecord]:
    survivors = {p: reg for p, reg in t.partitions.items() if p < count}
    before = tuple(sorted((p, reg.leader_epoch) for p, reg in survivors.items()))
    out = [records.partition_change(t.topic_id, p, before_deletion=before)
           for p in sorted(t.partitions) if p >= count and not t.partitions[p].marked_for_deletion]
    if out:
        out += [records.partition_change(t.topic_id, p, leader_epoch=e + 1) for p, e in before]
    return out


def resume_records(image: MetadataImage, ids: IdSource) -> list[Any]:
    """Records finishing procedures a previous controller left half-done in the log."""
    out: list[Any] = []
    live = image.live_brokers()
    alive = {b.broker_id for b in live}
    for name in sorted(image.topics):
        t = image.topics[name]
        have = len(t.partitions)
        if t.pending_after_creation and have < t.undeleted_partition_count:
            rf = len(next(iter(t.partitions.values())).replicas)
            new = assign_replicas(live, have, t.undeleted_partition_count - have,
                                  min(rf, len(live)), ids.rng)
            out += records.partitions(t.topic_id, new, alive, t.pending_after_creation,
                                      t.removed_leader_epochs)
            log.info("controller: resuming expansion of %s to %d partitions", name,
                     t.undeleted_partition_count)
        elif have > t.undeleted_partition_count and ordered_delivery(t):
            marks = _deletion_marks(t, t.undeleted_partition_count)
            if marks:
                log.info("controller: resuming deletion in %s down to %d partitions", name,
                         t.undeleted_partition_count)
            out += marks
    return out


# ---------------------------------------------------------------------- removal of drained
def marked_partitions(image: MetadataImage) -> list[tuple[str, int, int]]:
    """(topic, partition, leader) of every partition marked for deletion that has a leader."""
    return [(name, pid, reg.leader)
            for name in sorted(image.topics)
            for pid, reg in sorted(image.topics[name].partitions.items())
            if reg.marked_for_deletion and reg.leader >= 0]


def remove_partition(image: MetadataImage, name: str, partition: int) -> Result[bool]:
    """A drained marked partition's removal; response: whether it was still there to remove."""
    t = image.topics.get(name)
    if t is None or partition not in t.partitions:
        return Result((), False)
    return Result((records.remove_partition(t.topic_id, partition),), True)
