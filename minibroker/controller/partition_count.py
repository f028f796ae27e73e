"""KIP-253: changing a topic's partition count — expansion, and deletion by marking.

Expansion (count > undeleted count): the pre-bump leader epoch of every existing partition is
recorded in each new partition's leaderEpochAfterCreation, every existing partition's leader
epoch is bumped, and the new undeleted count is set. LeaderAndIsr (new epochs + count) reaches
the brokers before UpdateMetadata, so producers can only learn the new count once leaders
enforce it. Deletion (count < undeleted count, >= initial count): partitions >= count get
leaderEpochBeforeDeletion (survivor → its current epoch); survivors' epochs are bumped.
With enable.ordered.delivery=false the epoch steps are skipped and shrinking is refused.
"""
from __future__ import annotations

from kafka.errors import InvalidPartitionsError, InvalidReplicationAssignmentError

from minibroker.controller.placement import assign_replicas
from minibroker.controller.topics import ItemResult, partition_records
from minibroker.protocol import records as R


def ordered_delivery(topic) -> bool:
    return topic.configs.get("enable.ordered.delivery", "true").lower() != "false"


async def change_partition_count(ctl, name: str, count: int, assignments, validate_only: bool):
    from kafka.errors import UnknownTopicOrPartitionError
    t = ctl.image.topics.get(name)
    if t is None:
        return ItemResult(UnknownTopicOrPartitionError.errno, f"Topic {name} does not exist")
    undeleted = t.undeleted_partition_count
    marked = sorted(p for p, reg in t.partitions.items() if reg.marked_for_deletion)
    if count == undeleted:
        return ItemResult(InvalidPartitionsError.errno,
                          f"Topic already has {undeleted} partitions.")
    if count > undeleted:
        if marked:
            return ItemResult(InvalidPartitionsError.errno,
                              f"Topic {name} has partitions {marked} marked for deletion; "
                              "expansion is refused until they are removed (KIP-253)")
        records, err = _expansion(ctl, t, count, assignments)
    else:
        if not ordered_delivery(t):
            return ItemResult(InvalidPartitionsError.errno,
                              f"Topic currently has {undeleted} partitions, {count} would not be "
                              "an increase (enable.ordered.delivery=false).")
        if count < t.initial_partition_count:
            return ItemResult(InvalidPartitionsError.errno,
                              f"Cannot shrink below initial_partition_count "
                              f"{t.initial_partition_count}")
        if marked:
            return ItemResult(InvalidPartitionsError.errno,
                              f"Partitions {marked} are already marked for deletion")
        records, err = _deletion(t, count), None
    if err is not None:
        return err
    if not validate_only:
        await ctl.commit(records)
    return ItemResult(0)


def _expansion(ctl, t, count: int, assignments):
    first = len(t.partitions)
    live = ctl.image.live_brokers()
    rf = len(next(iter(t.partitions.values())).replicas)
    if assignments:
        if len(assignments) != count - first:
            return None, ItemResult(InvalidReplicationAssignmentError.errno,
                                    f"Increasing the number of partitions by {count - first} but "
                                    f"{len(assignments)} assignments provided.")
        new = {first + i: tuple(a) for i, a in enumerate(assignments)}
    else:
        if rf > len(live):
            return None, ItemResult(InvalidPartitionsError.errno,
                                    f"Replication factor {rf} larger than available brokers")
        new = assign_replicas(live, first, count - first, rf, ctl.ids.rng)
    ordered = ordered_delivery(t)
    records = [R.TopicPartitionCountRecord(topic_id=t.topic_id,
                                           initial_partition_count=t.initial_partition_count,
                                           undeleted_partition_count=count)]
    after_creation = ()
    if ordered:
        after_creation = tuple(sorted((p, reg.leader_epoch) for p, reg in t.partitions.items()))
        for p, reg in sorted(t.partitions.items()):
            records.append(ctl._change(t.topic_id, p, leader_epoch=reg.leader_epoch + 1))
    alive = {b.broker_id for b in live}
    records += partition_records(t.topic_id, new, alive, after_creation)
    return records, None


def _deletion(t, count: int) -> list:
    survivors = {p: reg for p, reg in t.partitions.items() if p < count}
    before = tuple(sorted((p, reg.leader_epoch) for p, reg in survivors.items()))
    records = [R.TopicPartitionCountRecord(topic_id=t.topic_id,
                                           initial_partition_count=t.initial_partition_count,
                                           undeleted_partition_count=count)]
    from minibroker.controller.controller import Controller
    for p in sorted(t.partitions):
        if p >= count:
            records.append(Controller._change(t.topic_id, p, before_deletion=before))
    for p, reg in sorted(survivors.items()):
        records.append(Controller._change(t.topic_id, p, leader_epoch=reg.leader_epoch + 1))
    return records
