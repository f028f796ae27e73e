"""Idempotent producer state of one partition (KIP-98; Kafka's ProducerStateManager).

Per producer id: its epoch and the metadata of its last 5 appended batches (Kafka's
NUM_BATCHES_TO_RETAIN), enough to answer a retried batch with its original offsets.

Appends are two-phase so that a failing batch in a multi-batch append changes nothing:
`prepare(...)` validates against the current state plus the earlier batches of the same append and
returns a `PendingProducerAppend` without mutating anything; `commit(pending)` installs it once the
batches are stored. `check_and_record` is both in one call.

Rules for client appends (AppendOrigin.CLIENT), as Kafka >= 2.5 (KIP-360):
- epoch older than the current one -> InvalidProducerEpochError (INVALID_PRODUCER_EPOCH);
- a batch equal (epoch, first seq, last seq) to one of the last 5 -> duplicate: the caller answers
  success with the original offsets and appends nothing;
- newer epoch: first sequence must be 0, else OutOfOrderSequenceNumberError — unless the producer had
  no epoch at all;
- same epoch: first sequence must be last sequence + 1 (wrapping at int32 max to 0), else
  OutOfOrderSequenceNumberError;
- unknown producer id (no state: never seen, or state cleared by truncate_fully): any sequence is
  accepted, as Kafka does since KIP-360, so producers whose data was removed by retention or
  DeleteRecords continue; UNKNOWN_PRODUCER_ID is never returned.
Replication appends (followers) are never rejected: they just record what the leader accepted.

Transactions (KIP-98): an entry's `current_txn_first_offset` is the first offset of its open
transaction (-1: none); `ongoing` maps the producers with one to it (the last stable offset's input).
A control batch (COMMIT/ABORT marker) ends the transaction; `prepare` lists it in
`PendingProducerAppend.completed` for the log's aborted-transaction index. A client's
non-transactional batch while its transaction is open is INVALID_TXN_STATE, as Kafka. Followers
build the same state from the replicated batches, so it survives a leader failover.
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, NamedTuple, Sequence

from kafka.errors import InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceNumberError

from minibroker.log.batch import INT32_MAX, NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader
from minibroker.log.transactions import COMMIT, CompletedTxn, control_type

NUM_BATCHES_TO_RETAIN = 5
CLIENT, COORDINATOR, REPLICATION = "client", "coordinator", "replication"     # Kafka's AppendOrigin


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int          # the batch's max timestamp as stored


class ProducerStateEntry:
    __slots__ = ("producer_id", "producer_epoch", "batches", "current_txn_first_offset")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH,
                 batches: Iterable[BatchMetadata] = (), current_txn_first_offset: int = -1) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.batches: deque[BatchMetadata] = deque(batches, maxlen=NUM_BATCHES_TO_RETAIN)
        self.current_txn_first_offset = current_txn_first_offset

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.batches,
                                  self.current_txn_first_offset)

    @property
    def last_timestamp(self) -> int:
        return self.batches[-1].timestamp if self.batches else -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def bump_epoch(self, epoch: int) -> None:
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add(self, epoch: int, meta: BatchMetadata) -> None:
        self.bump_epoch(epoch)
        self.batches.append(meta)

    def __repr__(self) -> str:
        return f"ProducerStateEntry({self.producer_id}, epoch={self.producer_epoch}, {list(self.batches)})"


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


class PendingProducerAppend:
    """Validated, not yet applied producer updates of one append."""
    __slots__ = ("entries", "duplicate", "completed")

    def __init__(self) -> None:
        self.entries: dict[int, ProducerStateEntry] = {}
        self.duplicate: BatchMetadata | None = None
        self.completed: list[CompletedTxn] = []     # transactions this append's markers end


class ProducerStateManager:
    __slots__ = ("_producers", "topic_partition", "ongoing")

    def __init__(self, topic_partition: str = "") -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        self.topic_partition = topic_partition
        self.ongoing: dict[int, int] = {}       # producer id -> first offset of its open transaction

    def entries(self) -> list[ProducerStateEntry]:
        return [self._producers[pid] for pid in sorted(self._producers)]

    def __len__(self) -> int:
        return len(self._producers)

    def __contains__(self, producer_id: int) -> bool:
        return producer_id in self._producers

    def get(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def prepare(self, headers: Sequence[BatchHeader], base_offsets: Sequence[int], *,
                origin: str = CLIENT, log_append_time: int = -1,
                buf: bytes | bytearray | memoryview | None = None) -> PendingProducerAppend:
        """Validate the producer batches of one append (offsets as they would be assigned;
        `log_append_time` >= 0 replaces the batches' max timestamps, as the log will).

        origin (Kafka's AppendOrigin): "client" gets every check; "coordinator" (the broker's own
        appends) only the epoch fence; "replication" none. Returns with `.duplicate` set at the first
        duplicate client batch, as Kafka's analyzeAndValidateProducerState; raises the Kafka error of
        the first invalid batch. Control batches (transaction markers) move the epoch and end the
        producer's open transaction; `buf` (the parsed buffer) gives their marker type."""
        pending = PendingProducerAppend()
        for header, base in zip(headers, base_offsets):
            if header.producer_id < 0:
                continue
            pid = header.producer_id
            entry = pending.entries.get(pid)
            if entry is None:
                current = self._producers.get(pid)
                entry = current.copy() if current is not None else ProducerStateEntry(pid)
                pending.entries[pid] = entry
            if origin != REPLICATION and header.producer_epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"Epoch of producer {pid} at offset {base} in partition {self.topic_partition} is "
                    f"{header.producer_epoch}, which is smaller than the last seen epoch {entry.producer_epoch}")
            if header.is_control:
                entry.bump_epoch(header.producer_epoch)
                first = entry.current_txn_first_offset
                if first >= 0:
                    committed = buf is not None and control_type(buf, header.offset_in_buf) == COMMIT
                    pending.completed.append(CompletedTxn(pid, first, base, committed))
                    entry.current_txn_first_offset = -1
                continue
            if header.is_transactional:
                if entry.current_txn_first_offset < 0 or header.producer_epoch != entry.producer_epoch:
                    entry.current_txn_first_offset = base
            elif origin == CLIENT and entry.current_txn_first_offset >= 0:
                raise InvalidTxnStateError(
                    f"Expected transactional write from producer {pid} at offset {base} in partition "
                    f"{self.topic_partition}")
            last_seq = header.last_sequence
            if origin == CLIENT:
                duplicate = entry.find_duplicate(header.producer_epoch, header.base_sequence, last_seq)
                if duplicate is not None:
                    pending.duplicate = duplicate
                    return pending
                self._check_sequence(entry, header, base)
            timestamp = header.max_timestamp if log_append_time < 0 else log_append_time
            entry.add(header.producer_epoch, BatchMetadata(
                header.base_sequence, last_seq, base, base + header.last_offset_delta, timestamp))
        return pending

    def _check_sequence(self, entry: ProducerStateEntry, header: BatchHeader, base_offset: int) -> None:
        epoch, first_seq = header.producer_epoch, header.base_sequence
        where = f"producer {entry.producer_id} at offset {base_offset} in partition {self.topic_partition}"
        if epoch != entry.producer_epoch:
            if first_seq != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceNumberError(
                    f"Invalid sequence number for new epoch of {where}: {epoch} (request epoch), "
                    f"{first_seq} (seq. number), {entry.producer_epoch} (current producer epoch)")
        elif entry.batches and not in_sequence(entry.last_seq, first_seq):
            raise OutOfOrderSequenceNumberError(
                f"Out of order sequence number for {where}: {first_seq} (incoming seq. number), "
                f"{entry.last_seq} (current end sequence number)")

    def commit(self, pending: PendingProducerAppend) -> None:
        assert pending.duplicate is None, "a duplicate append is answered, not committed"
        self._producers.update(pending.entries)
        ongoing = self.ongoing
        for pid, entry in pending.entries.items():
            if entry.current_txn_first_offset >= 0:
                ongoing[pid] = entry.current_txn_first_offset
            elif ongoing:
                ongoing.pop(pid, None)

    def check_and_record(self, header: BatchHeader, assigned_base_offset: int, *,
                         origin: str = CLIENT) -> BatchMetadata | None:
        """One batch: validate and, unless it is a duplicate (returned), record it."""
        pending = self.prepare([header], [assigned_base_offset], origin=origin)
        if pending.duplicate is None:
            self.commit(pending)
        return pending.duplicate

    def remove(self, producer_ids: Iterable[int]) -> None:
        for pid in producer_ids:
            self._producers.pop(pid, None)
            self.ongoing.pop(pid, None)

    def restore(self, entry: ProducerStateEntry) -> None:
        self._producers[entry.producer_id] = entry
        if entry.current_txn_first_offset >= 0:
            self.ongoing[entry.producer_id] = entry.current_txn_first_offset
        else:
            self.ongoing.pop(entry.producer_id, None)

    def clear(self) -> None:
        self._producers.clear()
        self.ongoing.clear()
