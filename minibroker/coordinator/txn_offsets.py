"""Transactional offset commits (KIP-98 TxnOffsetCommit, KIP-447 group fencing).

A transactional producer's offsets are written to the group's __consumer_offsets partition as a
transactional batch (its producer id and epoch), and stay pending per producer id
(`Shard.pending_txn_offsets`) until that partition's transaction marker: COMMIT replays them as
ordinary offset commits (minibroker.coordinator.replay), ABORT drops them. The same happens when a
broker loads the partition (the runtime replays transactional and control batches through
`replay_txn_records` / `complete_txn`), so offsets committed in a transaction survive a coordinator
move. OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a partition with a pending
transactional offset (`has_pending`), as Kafka.

Validation (Kafka's validateTransactionalOffsetCommit): generation < 0 with no member id skips the
member checks (pre-KIP-447 clients); otherwise the member must be in the group at that generation
(UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID; KIP-848 groups: the member epoch).
"""
from __future__ import annotations

import asyncio

import kafka.errors as Errors

from minibroker.coordinator.context import completed
from minibroker.coordinator.group.classic_group import OffsetAndMetadata
from minibroker.coordinator.group.classic_group_records import offset_commit_record
from minibroker.coordinator.replay import replay
from minibroker.protocol.records import OffsetCommitKey, decode_coordinator_record

OFFSET_METADATA_MAX_BYTES = 4096


def _validate(rt, shard, group_id: str, generation_id: int, member_id: str,
              group_instance_id: str | None) -> int:
    if generation_id < 0 and not member_id:
        return 0
    code = rt.consumer.validate_offset_commit(shard, group_id, member_id, generation_id)
    if code is not None:
        return code
    group = shard.groups.get(group_id)
    if group is None:
        return Errors.IllegalGenerationError.errno
    if group.is_static_member_fenced(group_instance_id, member_id):
        return Errors.FencedInstanceIdError.errno
    if member_id not in group.members:
        return Errors.UnknownMemberIdError.errno
    if generation_id != group.generation_id:
        return Errors.IllegalGenerationError.errno
    return 0


def commit_txn_offsets(rt, group_id: str, producer_id: int, producer_epoch: int,
                       generation_id: int, member_id: str, group_instance_id: str | None,
                       offsets: list[tuple[str, int, int, int, str | None]]) -> asyncio.Future:
    """offsets: (topic, partition, offset, leader_epoch, metadata). A future of
    {(topic, partition): error}, resolved once the records reached the high watermark."""
    keys = [(t, p) for t, p, *_ in offsets]
    shard, code = rt.shard_for(group_id)
    if not code:
        code = _validate(rt, shard, group_id, generation_id, member_id, group_instance_id)
    if code:
        return completed({k: code for k in keys})
    now = rt.clock.now_ms()
    result: dict[tuple[str, int], int] = {}
    records = []
    for topic, partition, offset, leader_epoch, metadata in offsets:
        if rt.metadata.partition(topic, partition) is None:
            result[(topic, partition)] = Errors.UnknownTopicOrPartitionError.errno
            continue
        metadata = metadata or ""
        if len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
            result[(topic, partition)] = Errors.OffsetMetadataTooLargeError.errno
            continue
        records.append(offset_commit_record(group_id, topic, partition,
                                            OffsetAndMetadata(offset, leader_epoch, metadata, now, -1)))
        result[(topic, partition)] = 0
    if not records:
        return completed(result)

    def written(code: int) -> None:
        if code == 0 and rt.is_active(shard):
            replay_txn_records(shard, producer_id, records)
    write = rt.append(shard, records, written, producer_id=producer_id,
                      producer_epoch=producer_epoch)
    fut = asyncio.get_running_loop().create_future()

    def finish(w: asyncio.Future) -> None:
        code = w.result()
        if code in (Errors.NotLeaderForPartitionError.errno, Errors.UnknownTopicOrPartitionError.errno):
            code = Errors.NotCoordinatorError.errno
        elif code in (Errors.InvalidProducerEpochError.errno,):
            code = Errors.ProducerFencedError.errno
        elif code:
            code = Errors.CoordinatorNotAvailableError.errno if code in (
                Errors.RequestTimedOutError.errno, Errors.NotEnoughReplicasError.errno) else code
        fut.set_result({k: (code if v == 0 else v) for k, v in result.items()})
    write.add_done_callback(finish)
    return fut


def replay_txn_records(shard, producer_id: int, records) -> None:
    """Offset records of a transactional batch: pending until the producer's marker."""
    pending = shard.pending_txn_offsets.setdefault(producer_id, {})
    for key, value in records:
        k, _ = decode_coordinator_record(key, None)
        if isinstance(k, OffsetCommitKey):
            pending[(k.group, k.topic, k.partition)] = (key, value)


def complete_txn(shard, producer_id: int, commit: bool) -> None:
    """The producer's marker in this partition: its pending offsets become commits, or vanish."""
    pending = shard.pending_txn_offsets.pop(producer_id, None)
    if commit and pending:
        for key, value in pending.values():
            replay(shard, key, value)


def has_pending(shard, group_id: str, topic: str, partition: int) -> bool:
    return any((group_id, topic, partition) in p for p in shard.pending_txn_offsets.values())
