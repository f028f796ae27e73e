"""KIP-179 draft: partition reassignment through any broker, with request ids and progress.

Pure planning: functions of the frozen image returning records and the answer to give.

AssignPartitions (forwarded here by whichever broker got it) is checked against the image and
becomes one PartitionReassignmentRecord, whose metadata-log offset is the request id (monotonic,
not contiguous, like the draft's znode version), and per partition a PartitionChangeRecord:
replicas = target + the replicas leaving, adding = target - current, removing = current - target.
The new replicas get LeaderAndIsr, fetch from the leader and join the ISR through its
AlterPartition. Once every target replica is in the ISR, a second PartitionChangeRecord sets
replicas = target and ISR = ISR ∩ target, elects a target replica if the leader leaves, and
clears adding/removing; the propagator then sends the leaving replicas StopReplica(delete).
As in the draft (and the ZooKeeper tool), one reassignment runs at a time.

Errors per (topic, partition, broker), as the draft lists them: INVALID_TOPIC_EXCEPTION for a
topic that does not exist, INVALID_PARTITIONS for a partition that does not, UNKNOWN_MEMBER_ID
for a broker id never registered (the partition's other brokers: INVALID_REPLICA_ASSIGNMENT, as
for an empty or repeated list); a partition named twice: INVALID_REQUEST. While a reassignment
runs, the whole request gets REASSIGNMENT_IN_PROGRESS.

Progress, per target replica, in offsets (polled by reassignment_progress.py): the numerator is
how much of the leader's log the replica holds (its log end offset - the leader's log start
offset) plus 1 once it is in the ISR;
the denominator is the leader's log size plus 1 (so never 0; -1 when the leader cannot be asked).
A replica that already hosted the partition counts as done. Error PARTITION_REASSIGNMENT_IN_PROGRESS
while the partition moves, 0 once it moved, UNKNOWN_TOPIC_OR_PARTITION if it was deleted first.
Completed requests are forgotten reassign.partitions.status.min.retention.ms after they started,
when the next request is accepted.

Kafka's own API for this (KIP-455: AlterPartitionReassignments, ListPartitionReassignments, as
kafka-python and kafka-reassign-partitions.sh use it) runs on the same records: see plan_alter.
A move cancelled there reports NO_REASSIGNMENT_IN_PROGRESS for its new replicas.
"""
from __future__ import annotations

import uuid
from typing import Any, NamedTuple

import kafka.errors as Errors

from minibroker.controller import records
from minibroker.controller.delta import NO_LEADER_CHANGE
from minibroker.controller.image import (MetadataImage, PartitionRegistration, Reassignment,
                                         TopicImage)
from minibroker.controller.result import Result

INVALID_TOPIC = Errors.InvalidTopicError.errno                        # 17
INVALID_PARTITIONS = Errors.InvalidPartitionsError.errno              # 37
UNKNOWN_MEMBER_ID = Errors.UnknownMemberIdError.errno                 # 25
INVALID_REPLICA_ASSIGNMENT = Errors.InvalidReplicationAssignmentError.errno   # 39
INVALID_REQUEST = Errors.InvalidRequestError.errno                    # 42
REASSIGNMENT_IN_PROGRESS = Errors.ReassignmentInProgressError.errno   # 60
NO_REASSIGNMENT_IN_PROGRESS = Errors.NoReassignmentInProgressError.errno   # 85
INVALID_REPLICATION_FACTOR = Errors.InvalidReplicationFactorError.errno    # 38
UNKNOWN_TOPIC_OR_PARTITION = Errors.UnknownTopicOrPartitionError.errno


class Accepted(NamedTuple):
    error_code: int
    error_message: str | None
    request_id: int
    results: list[tuple[str, int, int, int]]        # (topic, partition, broker, error code)


def plan(image: MetadataImage, assignments: list[tuple[str, int, list[int]]], now_ms: int,
         retention_ms: int) -> Result[Accepted]:
    """AssignPartitions: records starting the reassignment (none if nothing is valid) and the
    answer to give."""
    if image.moving:
        rid = next(iter(image.moving.values()))
        return Result((), Accepted(REASSIGNMENT_IN_PROGRESS,
                                   f"Reassignment {rid} is still running.", -1,
                                   [(t, p, b, REASSIGNMENT_IN_PROGRESS)
                                    for t, p, brokers in assignments for b in brokers or [-1]]))
    named: dict[tuple[str, int], int] = {}
    for t, p, _ in assignments:
        named[(t, p)] = named.get((t, p), 0) + 1
    results: list[tuple[str, int, int, int]] = []
    accepted: list[_Move] = []
    for t, p, brokers in assignments:
        codes = _check(image, t, p, brokers, named[(t, p)] > 1)
        results += [(t, p, b, c) for b, c in codes]
        if not any(c for _, c in codes):
            accepted.append((image.topics[t], p, tuple(brokers)))
    out = _records(image, accepted, now_ms, retention_ms)
    # The request id is the offset its PartitionReassignmentRecord gets: the next one.
    return Result(tuple(out), Accepted(0, None, image.offset + 1 if out else -1, results))


# A partition to move: its topic, index and target replicas.
_Move = tuple[TopicImage, int, tuple[int, ...]]
# KIP-455's answer per partition: (topic, partition, error code, message)
AlterResult = tuple[str, int, int, "str | None"]


def _records(image: MetadataImage, accepted: list[_Move], now_ms: int, retention_ms: int
             ) -> list[Any]:
    if not accepted:
        return []
    expired = sorted(rid for rid, ra in image.reassignments.items()
                     if ra.complete and ra.timestamp_ms < now_ms - retention_ms)
    out: list[Any] = [records.partition_reassignment(
        now_ms, expired, [(t.topic_id, p, target, t.partitions[p].replicas)
                          for t, p, target in accepted])]
    out += [_start(t.topic_id, p, t.partitions[p], target) for t, p, target in accepted]
    return out


def plan_alter(image: MetadataImage, items: list[tuple[str, int, list[int] | None]], now_ms: int,
               retention_ms: int, allow_rf_change: bool) -> Result[list[AlterResult]]:
    """KIP-455's AlterPartitionReassignments on the same machinery: the partitions given replicas
    form one request (with an id, so PartitionAssignmentStatus can follow it); null replicas
    cancel that partition's running move (back to its replicas before the move). Returns the
    records and [(topic, partition, error code, message)]. One request at a time, as above."""
    out: list[Any] = []
    accepted: list[_Move] = []
    results: list[AlterResult] = []
    alive = {b.broker_id for b in image.live_brokers()}
    for topic, pid, replicas in items:
        t = image.topics.get(topic)
        reg = t.partitions.get(pid) if t is not None else None
        code, msg = 0, None
        if t is None or reg is None:
            code = UNKNOWN_TOPIC_OR_PARTITION
        elif replicas is None:
            if (t.topic_id, pid) not in image.moving:
                code = NO_REASSIGNMENT_IN_PROGRESS
            else:
                change = _cancel(t.topic_id, pid, reg, alive)
                if change is None:
                    code, msg = REASSIGNMENT_IN_PROGRESS, "No replica of the partition's " \
                        "replicas before the move is in sync to lead it."
                else:
                    out.append(change)
        elif not replicas or len(set(replicas)) != len(replicas) \
                or any(b not in image.brokers for b in replicas):
            code, msg = INVALID_REPLICA_ASSIGNMENT, f"Invalid replica list {replicas}."
        elif not allow_rf_change and len(replicas) != len(reg.replicas):
            code = INVALID_REPLICATION_FACTOR
        elif image.moving:
            rid = next(iter(image.moving.values()))
            code, msg = REASSIGNMENT_IN_PROGRESS, f"Reassignment {rid} is still running."
        else:
            accepted.append((t, pid, tuple(replicas)))
        results.append((topic, pid, code, msg))
    return Result(tuple(out + _records(image, accepted, now_ms, retention_ms)), results)


def _cancel(topic_id: uuid.UUID, pid: int, reg: PartitionRegistration, alive: set[int]
            ) -> Any:
    original = [r for r in reg.replicas if r not in reg.adding_replicas]
    isr = [r for r in reg.isr if r in original]
    leader = reg.leader if reg.leader in original else \
        next((r for r in original if r in isr and r in alive), None)
    if not isr or leader is None:
        return None
    return records.partition_change(
        topic_id, pid, replicas=original, isr=isr, adding=[], removing=[],
        leader=leader if leader != reg.leader else NO_LEADER_CHANGE)


def ongoing(image: MetadataImage, wanted: dict[str, list[int]] | None
            ) -> list[tuple[str, int, PartitionRegistration]]:
    """KIP-455's ListPartitionReassignments: [(topic, partition, registration)] moving now."""
    out = []
    for topic_id, pid in image.moving:
        t = image.topic_by_id(topic_id)
        assert t is not None, "removing a topic ends its partitions' moves"
        if wanted is None or pid in wanted.get(t.name, ()):
            out.append((t.name, pid, t.partitions[pid]))
    return sorted(out, key=lambda x: x[:2])


def _check(image: MetadataImage, topic: str, partition: int, brokers: list[int],
           repeated: bool) -> list[tuple[int, int]]:
    entries = brokers or [-1]
    if repeated:
        return [(b, INVALID_REQUEST) for b in entries]
    t = image.topics.get(topic)
    if t is None:
        return [(b, INVALID_TOPIC) for b in entries]
    if partition not in t.partitions:
        return [(b, INVALID_PARTITIONS) for b in entries]
    if not brokers or len(set(brokers)) != len(brokers):
        return [(b, INVALID_REPLICA_ASSIGNMENT) for b in entries]
    unknown = [b for b in brokers if b not in image.brokers]
    if unknown:
        return [(b, UNKNOWN_MEMBER_ID if b in unknown else INVALID_REPLICA_ASSIGNMENT)
                for b in brokers]
    return [(b, 0) for b in brokers]


def _start(topic_id: uuid.UUID, partition: int, reg: PartitionRegistration,
           target: tuple[int, ...]) -> Any:
    current = reg.replicas
    if set(target) == set(current):                  # a new order only: nothing to copy
        return records.partition_change(topic_id, partition, replicas=target)
    return records.partition_change(
        topic_id, partition, replicas=target + tuple(r for r in current if r not in target),
        adding=[r for r in target if r not in current],
        removing=[r for r in current if r not in target])


def completion_records(image: MetadataImage) -> list[Any]:
    """For each moving partition whose target replicas are all in the ISR (and one of them can
    lead): the change that ends its reassignment."""
    alive = {b.broker_id for b in image.live_brokers()}
    out = []
    for topic_id, pid in sorted(image.moving, key=lambda k: (image.topics_by_id[k[0]], k[1])):
        t = image.topic_by_id(topic_id)
        assert t is not None, "removing a topic ends its partitions' moves"
        reg = t.partitions[pid]
        target = [r for r in reg.replicas if r not in reg.removing_replicas]
        isr = [r for r in reg.isr if r in target]
        if not set(reg.adding_replicas) <= set(reg.isr) or not isr:
            continue
        leader: int | None = reg.leader
        if leader not in target:
            leader = next((r for r in target if r in isr and r in alive), None)
            if leader is None:
                continue
        out.append(records.partition_change(
            topic_id, pid, replicas=target, isr=isr, adding=[], removing=[],
            leader=leader if leader != reg.leader else NO_LEADER_CHANGE))
    return out


def request(image: MetadataImage, request_id: int) -> Reassignment | None:
    """The request with this id; -1: the most recent one."""
    if request_id == -1:
        return image.reassignments[max(image.reassignments)] if image.reassignments else None
    return image.reassignments.get(request_id)
