"""KIP-253: changing a topic's partition count — expansion, and deletion by marking.

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
replay and finishes (resume_procedures). Drained marked partitions (log start offset == end
offset, by retention or DeleteRecords) are removed by a controller task (StopReplica delete=true).
With enable.ordered.delivery=false the epoch steps are skipped and shrinking is refused.
"""
from __future__ import annotations

import asyncio
import logging

from kafka.errors import (InvalidPartitionsError, InvalidReplicationAssignmentError, KafkaError,
                          RequestTimedOutError, UnknownTopicOrPartitionError)
from kafka.protocol.consumer import ListOffsetsRequest

from minibroker.controller import records
from minibroker.controller.placement import assign_replicas
from minibroker.controller.result import ControllerHalted, ItemResult

log = logging.getLogger("minibroker.controller")


def ordered_delivery(topic) -> bool:
    return topic.configs.get("enable.ordered.delivery", "true").lower() != "false"


def _count_record(t, count: int, pending=()):
    return records.partition_count(t.topic_id, t.initial_partition_count, count, pending)


async def change_partition_count(ctl, name: str, count: int, assignments, validate_only: bool):
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
        steps, err = _expansion(ctl, t, count, assignments)
        if err is not None:
            return err
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
        steps = [[_count_record(t, count)], _deletion_marks(t, count)]
    if validate_only:
        return ItemResult(0)
    try:
        await ctl.commit_steps(steps, site="controller.partition_count")
    except ControllerHalted:
        return ItemResult(RequestTimedOutError.errno,
                          "The controller stopped during the change; the next controller "
                          "completes it from the metadata log")
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
    alive = {b.broker_id for b in live}
    if not ordered_delivery(t):
        return [[_count_record(t, count)],
                records.partitions(t.topic_id, new, alive, (), t.removed_leader_epochs)], None
    pre_bump = tuple(sorted((p, reg.leader_epoch) for p, reg in t.partitions.items()))
    step1 = [_count_record(t, count, pre_bump)]
    step1 += [records.partition_change(t.topic_id, p, leader_epoch=e + 1) for p, e in pre_bump]
    return [step1, records.partitions(t.topic_id, new, alive, pre_bump,
                                     t.removed_leader_epochs)], None


def _deletion_marks(t, count: int) -> list:
    survivors = {p: reg for p, reg in t.partitions.items() if p < count}
    before = tuple(sorted((p, reg.leader_epoch) for p, reg in survivors.items()))
    out = [records.partition_change(t.topic_id, p, before_deletion=before)
           for p in sorted(t.partitions) if p >= count and not t.partitions[p].marked_for_deletion]
    if out:
        out += [records.partition_change(t.topic_id, p, leader_epoch=e + 1) for p, e in before]
    return out


def resume_records(ctl) -> list:
    """Records finishing procedures a previous controller left half-done in the log."""
    out = []
    live = ctl.image.live_brokers()
    alive = {b.broker_id for b in live}
    for name in sorted(ctl.image.topics):
        t = ctl.image.topics[name]
        have = len(t.partitions)
        if t.pending_after_creation and have < t.undeleted_partition_count:
            rf = len(next(iter(t.partitions.values())).replicas)
            new = assign_replicas(live, have, t.undeleted_partition_count - have,
                                  min(rf, len(live)), ctl.ids.rng)
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
async def removal_loop(ctl) -> None:
    interval = ctl.config.partition_deletion_check_interval_ms / 1000
    while ctl.running:
        await asyncio.sleep(interval)
        try:
            await remove_drained_partitions(ctl)
        except Exception:  # noqa: BLE001 — a broker may be down; try again next round
            log.exception("controller: checking partitions marked for deletion failed")


async def remove_drained_partitions(ctl) -> list[tuple[str, int]]:
    """One round: remove every marked partition whose log start offset reached its end."""
    candidates = [(name, pid, reg.leader)
                  for name in sorted(ctl.image.topics)
                  for pid, reg in sorted(ctl.image.topics[name].partitions.items())
                  if reg.marked_for_deletion and reg.leader >= 0]
    removed = []
    for name, pid, leader in candidates:
        start, end = await log_bounds(ctl, leader, name, pid)
        if start is not None and start == end:
            async with ctl._lock:
                t = ctl.image.topics.get(name)
                if t is None or pid not in t.partitions:
                    continue
                await ctl.commit([records.remove_partition(t.topic_id, pid)])
                removed.append((name, pid))
                log.info("controller: removed drained partition %s-%d", name, pid)
    return removed


async def log_bounds(ctl, leader: int, topic: str, partition: int):
    """(log start offset, log end offset) of a replica's log (the leader's, or any replica's):
    ListOffsets -2 / -1 as the debugging replica id, for which Kafka answers the log end offset
    rather than the high watermark, from any replica. (None, None) if it cannot answer."""
    b = ctl.image.brokers.get(leader)
    if b is None or b.fenced:
        return None, None
    T = ListOffsetsRequest.ListOffsetsTopic
    out = []
    try:
        conn = await ctl.propagator.connection(b)
        for ts in (-2, -1):
            req = ListOffsetsRequest(replica_id=-2, isolation_level=0, topics=[T(
                name=topic, partitions=[T.ListOffsetsPartition(
                    partition_index=partition, current_leader_epoch=-1, timestamp=ts)])])
            resp = await conn.request(req, 7, timeout=10)
            p = resp.topics[0].partitions[0]
            if p.error_code:
                return None, None
            out.append(p.offset)
    except (OSError, asyncio.TimeoutError, KafkaError) as e:
        log.info("controller: log bounds of %s-%d from broker %d: %r", topic, partition, leader, e)
        return None, None
    return out[0], out[1]
