"""The log of one partition replica: raw v2 record batches in memory, keyed by base offset.

Hot path rules: appends parse and patch batch headers only (no per-record work) and copy each batch's
bytes at most once: a caller that hands its buffer over (`adopt=True`: a large request frame, which
the network layer never reuses) has its batches kept and patched where they are, anything else is
copied; reads return read-only memoryviews made once per stored batch, so a Fetch never copies
record bytes. Only the timestamp lookups (`offset_for_timestamp`, `max_timestamp_offset`) read
records.

Decisions (Kafka behaviour unless said):
- Every batch acts as a segment for truncation and retention: they drop whole batches.
- `truncate_to(offset)` drops the batch containing `offset` entirely, so the LEO becomes that batch's
  base offset (Kafka cuts segments at batch boundaries too; followers truncate at epoch boundaries,
  which are batch boundaries). The log start offset is lowered to the LEO if it was inside that batch.
- retention.bytes deletes oldest batches while the log stays >= retention.bytes after the deletion
  (Kafka's `diff - segment.size >= 0`); retention.ms deletes the oldest batches whose max timestamp
  is more than retention.ms before now, stopping at the first one that is not. Neither deletes past
  the high watermark when one is given, and neither applies unless cleanup.policy contains delete.
- Producer state survives log start offset movement (DeleteRecords, retention) as in Kafka >= 2.5;
  truncation rebuilds the state of the producers whose batches were removed from what is left.
- Transactions (minibroker.log.transactions): producer state keeps each producer's open transaction,
  `txn_index` the completed ones not yet below the high watermark and the aborted ones;
  `first_unstable_offset(hw)` gives the last stable offset, `aborted_transactions(start, upper)` what
  a read_committed fetch returns. Truncation rebuilds both from the batches left.
"""
from __future__ import annotations

import struct
from array import array
from bisect import bisect_left, bisect_right
from typing import Any, Callable, Iterator, NamedTuple, Protocol, Sequence, TypeVar, cast

from kafka.errors import (InvalidRecordError, KafkaError, MessageSizeTooLargeError,
                          OffsetOutOfRangeError)

from minibroker.log.batch import (
    CONTROL_MASK, HEADER_SIZE, LOG_APPEND_TIME, NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK, BatchHeader,
    check_crc, increment_sequence, parse_batches, patch_batch, record_timestamps, set_log_append_time,
    validate_client_batch,
)
from minibroker.log import append_checks
from minibroker.log.config import LogConfig
from minibroker.log.epochs import LeaderEpochCache
from minibroker.log.memory import LogMemory
from minibroker.log.spill import SpillDir, SpillFile
from minibroker.log.records_check import check_records
from minibroker.log.twins import twin
from minibroker.log.producer_state import (
    CLIENT, REPLICATION, BatchMetadata, PendingProducerAppend, ProducerStateEntry, ProducerStateManager,
)
from minibroker.log.transactions import COMMIT, CompletedTxn, TxnIndex, control_type
from minibroker.log.untracked import untrack, untrack_soon, untracked


class AppendResult(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time_ms: int     # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False     # a retried idempotent batch: nothing appended, original offsets


class ReadResult(NamedTuple):
    records: list[bytes | memoryview]   # whole stored batches: read-only views, or a small one's bytes
    size: int
    first_offset: int           # base offset of the first batch, or the fetch offset when empty


class UnexpectedAppendOffsetError(Exception):
    """A follower append does not start at the log end offset (Kafka's UnexpectedAppendOffsetException)."""


# A copied batch up to this size is stored as bytes (StoredBatch): for a leader, which patches a
# bytearray first, one more copy of at most 4 KiB (~0.1 us) against two objects fewer, kept as
# long as the batch.
SMALL_BATCH_BYTES = 4096


class BatchFields(Protocol):
    """What a StoredBatch takes from its batch's header (a BatchHeader, or log/cleaner.py's)."""

    @property
    def last_offset_delta(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...


class StoredBatch:
    # Untracked by the cycle collector once made (log/untracked.py): it refers to bytes, views and
    # ints only.
    __slots__ = ("data", "view", "base_offset", "last_offset", "max_timestamp", "leader_epoch", "size",
                 "attributes", "producer_id", "producer_epoch", "base_sequence", "held",
                 "delete_horizon")

    def __init__(self, data: bytes | bytearray | memoryview, header: BatchFields, base_offset: int,
                 leader_epoch: int, max_timestamp: int, attributes: int, frame_share: int = 0,
                 view: bytes | memoryview | None = None) -> None:
        if view is None:
            if type(data) is not memoryview and len(data) <= SMALL_BATCH_BYTES:
                # Kept as bytes, which is its own read-only view: no memoryview and managed
                # buffer per small batch (two objects every full collection walks, ~340 bytes).
                data = view = bytes(data)       # bytes already: the same object
            else:
                view = memoryview(data).toreadonly()
        # A follower sharing its leader's batch shares its view too (log/twins.py).
        self.data = data
        self.view = view
        self.base_offset = base_offset
        self.last_offset = base_offset + header.last_offset_delta
        self.max_timestamp = max_timestamp
        self.leader_epoch = leader_epoch
        self.size = header.size
        self.attributes = attributes
        self.producer_id = header.producer_id
        self.producer_epoch = header.producer_epoch
        self.base_sequence = header.base_sequence
        # What keeping this batch really holds (log.memory.max.bytes counts it): its objects
        # (the fuzzer's 70-byte batches held ~7x their size, so 10 MB became 107 MB) and, adopted
        # from a request or fetch frame, its share of the rest of that buffer (_frame_shares).
        self.held = self.size + BATCH_OVERHEAD + frame_share
        self.delete_horizon = -1        # compaction: when its tombstones may go (log/cleaner.py)
        if view is data:                # small: in a run (log/untracked.py)
            untrack_soon(self)
        else:                           # a run would keep up to 256 large batches alive
            untrack(self)

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    def __repr__(self) -> str:
        return (f"StoredBatch({self.base_offset}..{self.last_offset}, epoch={self.leader_epoch}, "
                f"size={self.size}, max_ts={self.max_timestamp})")


def _header_field(fmt: str, offset: int) -> Any:
    """A SpilledBatch field read from its header in the mapping when asked for."""
    unpack = struct.Struct(fmt).unpack_from

    def get(self: "SpilledBatch") -> int:
        return unpack(self._file.whole, self._pos + offset)[0]  # type: ignore[no-any-return]

    def set_(self: "SpilledBatch", _: Any) -> None:
        raise AttributeError("a spilled batch's header is in its file")
    return property(get, set_)


class SpilledBatch(StoredBatch):
    """A batch in a spill file (log/spill.py), made when a log is asked for it: the log keeps
    only the SpillFile in its place. Its offsets and size come from the file's arrays (all that
    a Fetch reads besides the bytes), its other header fields from the mapping when asked for,
    its bytes (`data`, `view`) are cut from the mapping, and compaction's delete horizon is the
    file's."""
    __slots__ = ("_file", "_pos")

    def __init__(self, file: SpillFile, j: int) -> None:
        pos = file.positions[j]
        self.base_offset = file.bases[j]
        self.last_offset = file.lasts[j]
        self.size = file.end_of(j) - pos
        self.held = SPILLED_BATCH_OVERHEAD
        self._file = file
        self._pos = pos

    leader_epoch = _header_field(">i", 12)
    attributes = _header_field(">h", 21)
    max_timestamp = _header_field(">q", 35)
    producer_id = _header_field(">q", 43)
    producer_epoch = _header_field(">h", 51)
    base_sequence = _header_field(">i", 53)

    @property
    def view(self) -> memoryview:
        return self._file.whole[self._pos:self._pos + self.size]

    @view.setter
    def view(self, _: Any) -> None:
        raise AttributeError("a spilled batch's bytes are in its file")

    data = view

    @property
    def delete_horizon(self) -> int:
        return self._file.horizons.get(self.base_offset, -1)

    @delete_horizon.setter
    def delete_horizon(self, horizon: int) -> None:
        if horizon >= 0:
            self._file.horizons[self.base_offset] = horizon
        else:
            self._file.horizons.pop(self.base_offset, None)


def _leader_batches(views: list[memoryview], leader_log: "PartitionLog | None"
                    ) -> tuple[list[BatchHeader], list[StoredBatch]] | None:
    """(headers, the leader's StoredBatches) for views a memory pipe handed over, when each is the
    view of the leader's batch at its base offset (the same object: no compare, no CRC), else
    None. Control batches (transaction markers) go the byte path: their producer state reads the
    marker from one buffer."""
    if leader_log is None:
        return None
    headers, same = [], []
    for v in views:
        hs = parse_batches(v, verify_crc=False)
        b = leader_log.stored_at(hs[0].base_offset) if len(hs) == 1 else None
        if b is None or b.view is not v or hs[0].attributes & CONTROL_MASK:
            return None
        headers.append(hs[0])
        same.append(b)
    return headers, same


# StoredBatch, its read-only view, the bytearray header, the two list slots and the base offset
# int, by sys.getsizeof on CPython 3.11. A small batch kept as bytes holds ~340 bytes less; the
# cap counts every batch alike.
BATCH_OVERHEAD = 400
# A spilled batch: its base offset in the log's array, its slot in the log's list, and its
# offsets and position in its SpillFile's arrays (log/spill.py): 40.7 bytes measured
# (tracemalloc, 100,000 spilled), and the arrays' growth.
SPILLED_BATCH_OVERHEAD = 48


def _frame_shares(view: memoryview, headers: list[BatchHeader], frame_records: int) -> list[int]:
    """Adopted batches keep their whole frame alive: the frame's bytes beyond the record sets kept
    from it (`frame_records`, these batches' among them, by this log or others:
    log.adoption.frame_records) are split among those in proportion, so that
    log.memory.max.bytes counts the frame once."""
    owner = view.obj
    mine = sum(h.size for h in headers)
    kept = max(frame_records, mine)
    # `owner` is the frame's bytearray (typeshed types it Buffer, which is not Sized).
    extra = max(0, (len(owner) if owner is not None else 0) - kept) * mine // kept  # type: ignore[arg-type]
    share, rest = divmod(extra, len(headers))
    return [share + rest] + [share] * (len(headers) - 1)


def _as_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = records if isinstance(records, memoryview) else memoryview(records)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


_T = TypeVar("_T")


def _iter_from(items: list[_T], start: int) -> Iterator[_T]:
    """The items of a list from index `start` on, reached in O(1): islice would step through the
    `start` items before it, and a fetch at the tail of a long log would walk all of them."""
    it = iter(items)
    it.__setstate__(start)  # type: ignore[attr-defined]  # a list iterator's; typeshed has no such type
    return it


class PartitionLog:
    # Where the high watermark stood when the log was last checkpointed (a log on disk,
    # log/disk_log.py); the Partition starts from it.
    recovered_high_watermark = 0

    def __init__(self, topic: str, partition: int, config: LogConfig, clock: Any, *,
                 verify_follower_crc: bool = True, memory: LogMemory | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.config = config
        self.clock = clock
        # Followers re-check the leader's CRCs like Kafka; False skips it (batches come from our own
        # leader, which verified them on produce).
        self.verify_follower_crc = verify_follower_crc
        # The batches in offset order, as parallel lists (base offsets for bisect); entries before
        # `_head` were dropped from the front and are compacted away in bulk. A leader only ever
        # appends at the end, so a store is two list appends (a sorted map cost a fifth of a
        # single-record produce).
        # Base offsets in an array: 8 bytes a batch, where a list's slot and int took 40 (a
        # spilled batch keeps its base offset here). `_stored` is untracked (log/untracked.py):
        # it holds StoredBatches, SpillFiles and None only. A spilled batch's slot holds its
        # SpillFile (log/spill.py), shared by every batch in that file: `_batch(i)` and
        # `_batches(i)` read such a batch from there. Slots before `_head` hold None (dropped,
        # see _drop_front) and are never read: typed by the slots that are.
        self._bases = array("q")
        self._stored: list[StoredBatch | SpillFile] = untracked([])
        self._head = 0
        # No slot at or past this index holds a SpillFile: reads there take the list as it is.
        self._spilled_below = 0
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.size_bytes = 0
        self.held_bytes = 0             # what the batches really hold (LogMemory counts this)
        self.epochs = LeaderEpochCache()
        self.producers = ProducerStateManager(f"{topic}-{partition}")
        self.txn_index = TxnIndex()
        # The broker's log memory (accounting, and its cap evicting our oldest batches), and where
        # eviction must stop: the partition's high watermark (set by the owning Partition).
        self.memory = memory if memory is not None else LogMemory()
        self.memory.register(self)
        self.high_watermark_of: Callable[[], int] = lambda: self.log_end_offset
        # Batches below this offset were spilled (log/spill.py), except rewritten ones: a hint
        # for where the next spill starts looking.
        self._spilled_end = 0
        self._spilling = 0              # bytes of ours the spill thread is writing
        # Compaction (log/cleaner.py): where the last cleaning ended, the earliest delete horizon of
        # the tombstones kept (-1: none), and the active segment (rolled on append by segment.ms /
        # segment.bytes, tracked only on compacted topics: its base offset, start time and bytes).
        self.first_dirty_offset = 0
        self.next_delete_horizon = -1
        self._segment_base: int | None = None
        self._segment_started_ms = 0
        self._segment_bytes = 0

    def __repr__(self) -> str:
        return (f"PartitionLog({self.topic}-{self.partition}, [{self.log_start_offset}, {self.log_end_offset}), "
                f"{self.batch_count} batches, {self.size_bytes} bytes)")

    @property
    def batch_count(self) -> int:
        return len(self._stored) - self._head

    @property
    def last_batch_leader_epoch(self) -> int:
        return self._batch(len(self._stored) - 1).leader_epoch if self.batch_count else -1

    def _batch(self, i: int) -> StoredBatch:
        """The batch in slot `i` (>= _head), from its spill file's header if it was spilled."""
        b = self._stored[i]
        return SpilledBatch(b, b.index_of(self._bases[i])) if isinstance(b, SpillFile) else b

    def _batches(self, start: int) -> Iterator[StoredBatch]:
        """The batches from slot `start` on, as a list iterator goes (it sees appends made
        while it runs)."""
        if start >= self._spilled_below:
            return cast("Iterator[StoredBatch]", _iter_from(self._stored, start))
        return self._with_spilled(start)

    def _with_spilled(self, start: int) -> Iterator[StoredBatch]:
        stored, bases = self._stored, self._bases
        i = start
        while i < len(stored):
            b = stored[i]
            yield SpilledBatch(b, b.index_of(bases[i])) if isinstance(b, SpillFile) else b
            i += 1

    def _live(self) -> Iterator[StoredBatch]:
        return self._batches(self._head)

    # -- appends ---------------------------------------------------------------------------------------

    def duplicate_of(self, records: bytes | bytearray | memoryview) -> AppendResult | None:
        """The original append of an idempotent batch this log already holds (same producer id,
        epoch and sequence range), or None: what a retry of it would be answered."""
        try:
            headers = parse_batches(_as_view(records))
        except KafkaError:              # not parseable: the append path answers it
            return None
        if len(headers) != 1 or headers[0].producer_id < 0 or headers[0].base_sequence < 0:
            return None
        h = headers[0]
        entry = self.producers.get(h.producer_id)
        dup = entry.find_duplicate(h.producer_epoch, h.base_sequence, h.last_sequence) \
            if entry else None
        if dup is None:
            return None
        return AppendResult(dup.first_offset, dup.last_offset, NO_TIMESTAMP, self.log_start_offset,
                            True)

    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         now_ms: int | None = None, *, origin: str = CLIENT,
                         adopt: bool | int = False) -> AppendResult:
        """Validate every batch, then assign offsets, stamp `leader_epoch` and store (all or nothing).

        `adopt=True`: `records` is writable and the caller hands its bytes over (nothing else
        writes them again), so the batches are patched and kept in place instead of copied. An
        int is the same, for a frame whose slices several logs keep: the bytes they keep in all
        (log.adoption.frame_records), so that the frame is counted once.

        `origin="coordinator"` is for the broker's own appends (transaction markers, coordinator records):
        control batches allowed, no client batch rules, producer epochs fenced but no sequence checks."""
        view = _as_view(records)
        headers = parse_batches(view)
        if not headers:
            raise InvalidRecordError(f"Produce request to {self.topic}-{self.partition} has no record batch")
        config = self.config
        max_bytes = config.max_message_bytes
        bases: list[int] = []
        next_offset = self.log_end_offset
        with_producer_id = False
        # LogValidator's config-driven checks (log/append_checks.py): a header compare unless
        # the topic is compacted or recompresses.
        now = now_ms if now_ms is not None else self.clock.now_ms() if self.clock else None
        check_times = (origin == CLIENT and config.timestamp_bounds_set
                       and not config.log_append_time and now is not None)
        check_keys = origin == CLIENT and config.compacts
        recompress = origin == CLIENT and config.compression_type != "producer"
        for h in headers:
            if origin == CLIENT:
                validate_client_batch(h)
            if h.size > max_bytes:
                raise MessageSizeTooLargeError(
                    f"The record batch size in the append to {self.topic}-{self.partition} is {h.size} bytes "
                    f"which exceeds the maximum configured value of {max_bytes}.")
            if origin == CLIENT:
                start = h.offset_in_buf + HEADER_SIZE
                check_records(view[start:h.offset_in_buf + h.size], h.records_count, h.compression)
                if check_times:     # with `now` set
                    append_checks.check_timestamps(view, h, config, now)  # type: ignore[arg-type]
                if check_keys and not h.is_control:
                    append_checks.check_keys(view, h, f"{self.topic}-{self.partition}")
            bases.append(next_offset)
            next_offset += h.last_offset_delta + 1
            with_producer_id = with_producer_id or h.producer_id >= 0
        append_time = NO_TIMESTAMP
        if self.config.log_append_time:
            append_time = self.clock.now_ms() if now_ms is None else now_ms
        pending = None      # batches without a producer id have no producer state to check
        if with_producer_id:
            pending = self.producers.prepare(headers, bases, origin=origin, log_append_time=append_time,
                                             buf=view)
            if pending.duplicate is not None:
                dup = pending.duplicate
                return AppendResult(dup.first_offset, dup.last_offset,
                                    dup.timestamp if append_time != NO_TIMESTAMP else NO_TIMESTAMP,
                                    self.log_start_offset, True)
        shares = _frame_shares(view, headers, int(adopt)) if adopt else None
        data: bytearray | memoryview
        for i, (h, base) in enumerate(zip(headers, bases)):
            rewritten = append_checks.recompress(view, h, config) if recompress else None
            if rewritten is not None:
                data, h = rewritten         # the topic's codec: a new buffer, a new header
            else:
                data = view[h.offset_in_buf:h.offset_in_buf + h.size]
                if not adopt:
                    data = bytearray(data)      # the one copy
            patch_batch(data, 0, base, leader_epoch)
            share = shares[i] if shares and rewritten is None else 0
            if append_time != NO_TIMESTAMP:
                set_log_append_time(data, 0, append_time)
                self._store(StoredBatch(data, h, base, leader_epoch, append_time,
                                        h.attributes | TIMESTAMP_TYPE_MASK, share))
            else:
                self._store(StoredBatch(data, h, base, leader_epoch, h.max_timestamp, h.attributes,
                                        share))
        self.epochs.assign(leader_epoch, bases[0])
        if pending is not None:
            self._commit_producers(pending)
        return AppendResult(bases[0], next_offset - 1, append_time, self.log_start_offset, False)

    def append_as_follower(self, records: bytes | bytearray | memoryview | list[memoryview], *,
                           adopt: bool | int = False,
                           leader_log: "PartitionLog | None" = None) -> AppendResult:
        """Append batches fetched from the leader, keeping their offsets and leader epochs.

        The batches must start at or after the LEO and follow one another, else
        UnexpectedAppendOffsetError; as in Kafka, a gap is kept (the leader's cleaner drops
        batches left empty, so a follower that fell behind fetches across it). `adopt=True` keeps
        the batches where they are, as in append_as_leader. As Kafka's Partition.appendRecordsToFollowerOrFutureReplica, an empty
        log whose LEO falls inside the first batch (the leader's log start offset moved inside a batch by
        DeleteRecords) restarts at that batch's base offset. A trailing partial batch is ignored.
        `leader_log`: the leader's log, in this process; a batch it holds byte for byte is stored
        as the leader's bytes (log/twins.py). `records` may also be a list of the leader's stored
        batches' views, handed over by a memory pipe (protocol/gathered.py): stored as they are."""
        same: Sequence[StoredBatch | None]
        if type(records) is list:       # the leader's stored batches, handed over (a memory pipe)
            view, shared = None, _leader_batches(records, leader_log)
            if shared is None:          # not (or no longer) the leader's: as received bytes
                return self.append_as_follower(bytearray().join(records), leader_log=leader_log)
            headers, same = shared
        else:
            view = _as_view(records)  # type: ignore[arg-type]  # not a list: the branch above
            headers, same = self._parse_fetched(view, leader_log)
        if not headers:
            return AppendResult(self.log_end_offset, self.log_end_offset - 1, NO_TIMESTAMP, self.log_start_offset)

        first = headers[0]
        if (not self.batch_count and first.base_offset < self.log_end_offset <= first.last_offset):
            start = self.log_start_offset
            self.truncate_fully_and_start_at(first.base_offset)
            self.log_start_offset = start
        expected = self.log_end_offset
        for h in headers:
            if h.base_offset < expected:
                raise UnexpectedAppendOffsetError(
                    f"{self.topic}-{self.partition}: batch at base offset {h.base_offset} is below the log's "
                    f"next offset {expected}")
            expected = h.last_offset + 1
        pending = self.producers.prepare(headers, [h.base_offset for h in headers], origin=REPLICATION,
                                         buf=view)
        # A list of the leader's views is never adopted (log/adoption.py): `view` is set.
        shares = _frame_shares(view, headers, int(adopt)) if adopt else None  # type: ignore[arg-type]
        for i, h in enumerate(headers):
            leaders = same[i]
            if leaders is not None:     # and the leader's share of the frame holding them
                data, share = leaders.data, leaders.held - leaders.size - BATCH_OVERHEAD
                if share < 0:           # a spilled leader batch: its bytes are in a file
                    share = 0
            else:               # a received view (a list's batches are all the leader's)
                data = view[h.offset_in_buf:h.offset_in_buf + h.size]  # type: ignore[index]
                share = shares[i] if shares else 0
                if not adopt:       # a small batch straight to bytes, as StoredBatch keeps it
                    data = bytes(data) if h.size <= SMALL_BATCH_BYTES else bytearray(data)
            self._store(StoredBatch(data, h, h.base_offset, h.partition_leader_epoch, h.max_timestamp,
                                    h.attributes, share, leaders.view if leaders is not None else None))
            if h.partition_leader_epoch >= 0:
                self.epochs.assign(h.partition_leader_epoch, h.base_offset)
        self._commit_producers(pending)
        return AppendResult(first.base_offset, expected - 1, NO_TIMESTAMP, self.log_start_offset)

    def _parse_fetched(self, view: memoryview, leader_log: "PartitionLog | None"
                       ) -> tuple[list[BatchHeader], list[StoredBatch | None]]:
        """The headers of fetched batches, checked, and for each the leader's StoredBatch holding
        the same bytes, or None. A batch equal byte for byte to one the leader stored passed the
        leader's CRC check when it was produced: only the others are checked (2 of RF 3's 3 checks
        per byte go)."""
        verify = self.verify_follower_crc
        headers = parse_batches(view, verify_crc=verify and leader_log is None, allow_partial_tail=True)
        same: list[StoredBatch | None] = [None] * len(headers)
        if leader_log is not None:
            for i, h in enumerate(headers):
                same[i] = twin(leader_log, h.base_offset, view[h.offset_in_buf:h.offset_in_buf + h.size])
                if same[i] is None and verify:
                    check_crc(view, h)
        return headers, same

    def _commit_producers(self, pending: PendingProducerAppend) -> None:
        self.producers.commit(pending)
        if pending.completed:
            for txn in pending.completed:
                self.txn_index.completed(txn)
            # Forget what the high watermark has passed (a follower is rarely asked its LSO).
            self.txn_index.first_unstable_offset(self.producers.ongoing, self.high_watermark_of())

    def _store(self, batch: StoredBatch) -> None:
        if self.config.compacts:
            self._maybe_roll(batch)
        self._bases.append(batch.base_offset)
        self._stored.append(batch)
        self.memory.stored(batch.held)
        self.size_bytes += batch.size
        self.held_bytes += batch.held
        self.log_end_offset = batch.last_offset + 1

    def _maybe_roll(self, batch: StoredBatch) -> None:
        """Kafka's UnifiedLog.maybeRoll: a new segment after segment.ms or segment.bytes."""
        now = self.clock.now_ms() if self.clock is not None else 0
        if (self._segment_base is None or now - self._segment_started_ms >= self.config.segment_ms
                or self._segment_bytes + batch.size > self.config.segment_bytes):
            self._segment_base, self._segment_started_ms, self._segment_bytes = (
                batch.base_offset, now, 0)
        self._segment_bytes += batch.size

    @property
    def active_segment_base(self) -> int:
        """Where the active segment starts (the LEO when none is tracked: all of it rolled)."""
        return self.log_end_offset if self._segment_base is None else self._segment_base

    @property
    def last_batch_base(self) -> int:
        return self._bases[-1] if self.batch_count else self.log_end_offset

    def stored_at(self, base_offset: int) -> StoredBatch | None:
        """The batch starting at `base_offset`, if one does."""
        i = bisect_right(self._bases, base_offset, self._head) - 1
        return self._batch(i) if i >= self._head and self._bases[i] == base_offset else None

    def batches_from(self, offset: int) -> Iterator[StoredBatch]:
        """The stored batches from the one holding `offset` on, in offset order."""
        start = max(bisect_right(self._bases, offset, self._head) - 1, self._head)
        return self._batches(start)

    def replace_batches(self, replacements: dict[int, StoredBatch | None]) -> None:
        """Compaction: swap the batches at these base offsets for rewritten ones (None: drop),
        offsets kept. Readers holding the old batches' views keep reading the old bytes."""
        stored, bases = self._stored, self._bases
        self._spilled_below = 0             # as the kept slots are, below
        kept_batches: list[StoredBatch | SpillFile] = []
        kept_bases = array("q")
        freed = added = 0
        for i in range(self._head, len(stored)):
            kept: StoredBatch | SpillFile = stored[i]
            if bases[i] in replacements:
                batch = self._batch(i)
                new = replacements[batch.base_offset]
                self.size_bytes -= batch.size
                self.held_bytes -= batch.held
                freed += batch.held
                if new is None:
                    continue
                self.size_bytes += new.size
                self.held_bytes += new.held
                added += new.held
                kept = new
            kept_batches.append(kept)
            kept_bases.append(bases[i])
            if isinstance(kept, SpillFile):
                self._spilled_below = len(kept_batches)
        self._stored, self._bases, self._head = untracked(kept_batches), kept_bases, 0
        self._spilled_end = 0           # rewritten batches are in memory again
        self.memory.released(freed)
        self.memory.stored(added)

    # -- reads -----------------------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one: bool = True) -> ReadResult:
        """Whole batches from the one containing `fetch_offset`, each with last offset < `max_offset`
        (the high watermark; default the LEO), up to `max_bytes` — but at least one batch if `min_one`
        (KIP-74). Raises OffsetOutOfRangeError outside [log_start_offset, log_end_offset]."""
        if not self.log_start_offset <= fetch_offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Fetch offset {fetch_offset} is out of range for {self.topic}-{self.partition}: "
                f"[{self.log_start_offset}, {self.log_end_offset}]")
        if max_offset is None:
            max_offset = self.log_end_offset
        head = self._head
        start = max(bisect_right(self._bases, fetch_offset, head) - 1, head)
        if start < self._spilled_below:
            return self._read_spilled(start, fetch_offset, max_bytes, max_offset, min_one)
        out: list[bytes | memoryview] = []
        size = 0
        first_offset = fetch_offset
        for batch in cast("Iterator[StoredBatch]", _iter_from(self._stored, start)):
            if batch.last_offset < fetch_offset:
                continue
            if batch.last_offset >= max_offset:
                break
            if size + batch.size > max_bytes and (out or not min_one):
                break
            if not out:
                first_offset = batch.base_offset
            out.append(batch.view)
            size += batch.size
        return ReadResult(out, size, first_offset)

    def _read_spilled(self, start: int, fetch_offset: int, max_bytes: int, max_offset: int,
                      min_one: bool) -> ReadResult:
        """read() from a slot below _spilled_below: a spilled batch's offsets, size and bytes
        straight from its file's arrays and mapping. A SpilledBatch made for each cost 4x the
        time per batch of a consumer catching up (2 against 0.5 us)."""
        stored, bases = self._stored, self._bases
        out: list[bytes | memoryview] = []
        size = 0
        first_offset = fetch_offset
        for i in range(start, len(stored)):
            e = stored[i]
            if isinstance(e, SpillFile):
                j = e.index_of(bases[i])
                last, pos = e.lasts[j], e.positions[j]
                n = e.end_of(j) - pos
            else:
                last, n = e.last_offset, e.size
            if last < fetch_offset:
                continue
            if last >= max_offset or (size + n > max_bytes and (out or not min_one)):
                break
            if not out:
                first_offset = bases[i]
            out.append(e.whole[pos:pos + n] if isinstance(e, SpillFile) else e.view)
            size += n
        return ReadResult(out, size, first_offset)

    # -- transactions ----------------------------------------------------------------------------------

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of a transaction still open, or decided but not yet below
        `high_watermark`; None if there is none (the LSO is then the high watermark)."""
        if not self.producers.ongoing and not self.txn_index.unreplicated:
            return None
        return self.txn_index.first_unstable_offset(self.producers.ongoing, high_watermark)

    def aborted_transactions(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions with records in [start, upper)."""
        return self.txn_index.aborted_in(start, upper) if self.txn_index.aborted else []

    def _rebuild_transactions(self) -> None:
        """After truncation: open and aborted transactions again from the batches left."""
        ongoing: dict[int, tuple[int, int]] = {}         # pid -> (first offset, epoch)
        self.txn_index.clear()
        for b in self._live():
            if b.producer_id < 0 or not b.attributes & TRANSACTIONAL_MASK:
                continue
            if b.attributes & CONTROL_MASK:
                started = ongoing.pop(b.producer_id, None)
                if started is not None:
                    self.txn_index.completed(CompletedTxn(
                        b.producer_id, started[0], b.base_offset, control_type(b.data) == COMMIT))
            elif b.producer_id not in ongoing:
                ongoing[b.producer_id] = (b.base_offset, b.producer_epoch)
        for entry in self.producers.entries():
            if entry.producer_id not in ongoing and entry.current_txn_first_offset >= 0:
                entry.current_txn_first_offset = -1
                self.producers.restore(entry)
        for pid, (first, epoch) in ongoing.items():
            entry = self.producers.get(pid) or ProducerStateEntry(pid, epoch)
            entry.current_txn_first_offset = first
            self.producers.restore(entry)

    # -- truncation, log start offset, retention -------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: remove every offset >= `offset` (the whole batch containing it).
        Returns whether anything changed."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.topic}-{self.partition} to negative offset {offset}")
        if offset >= self.log_end_offset:
            # As Kafka's UnifiedLog.truncateTo: always drop epoch entries at or past the log end. A
            # broker that became leader and was replaced before appending anything holds such an
            # entry; kept, it is sent as last_fetched_epoch forever and the leader keeps answering
            # with a diverging epoch the follower cannot act on.
            self.epochs.truncate_from_end(self.log_end_offset)
            return False
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        stored = self._stored
        i = bisect_right(self._bases, offset, self._head) - 1
        if i < self._head or self._batch(i).last_offset < offset:
            i += 1
        removed: set[int] = set()
        if i < len(stored):
            freed = held = 0
            for batch in self._batches(i):
                freed += batch.size
                held += batch.held
                if batch.producer_id >= 0:
                    removed.add(batch.producer_id)
            self.size_bytes -= freed
            self.held_bytes -= held
            self.memory.released(held)
            self.log_end_offset = self._bases[i]
            del stored[i:], self._bases[i:]
            self._spilled_below = min(self._spilled_below, i)
        self.log_end_offset = min(self.log_end_offset, offset)
        self.log_start_offset = min(self.log_start_offset, self.log_end_offset)
        self.first_dirty_offset = min(self.first_dirty_offset, self.log_end_offset)
        self._spilled_end = min(self._spilled_end, self.log_end_offset)
        if self._segment_base is not None and self._segment_base >= self.log_end_offset:
            self._segment_base = None
        self.epochs.truncate_from_end(self.log_end_offset)
        self._rebuild_producers(removed)
        if self.producers.ongoing or self.txn_index.aborted or self.txn_index.unreplicated or removed:
            self._rebuild_transactions()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at `offset` (a follower out of range of its leader)."""
        del self._bases[:]
        self._stored.clear()
        self._head = self._spilled_below = 0
        self.memory.released(self.held_bytes)
        self.size_bytes = self.held_bytes = 0
        self.log_start_offset = self.log_end_offset = offset
        self.first_dirty_offset, self._segment_base = offset, None
        self._spilled_end = offset
        self.epochs.clear()
        self.producers.clear()
        self.txn_index.clear()

    def delete(self) -> None:
        """The replica is no longer hosted here: its bytes go back to the log memory."""
        self.truncate_fully_and_start_at(0)
        self.memory.unregister(self)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: the log now starts at `offset`; batches wholly below it are dropped. Returns the
        new log start offset. OffsetOutOfRangeError past the LEO (the caller checks the high watermark)."""
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of {self.topic}-{self.partition} "
                f"since it is larger than the log end offset {self.log_end_offset}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._drop_front(lambda b: b.last_offset < offset)
            self.epochs.truncate_from_start(offset)
            self.txn_index.drop_before(offset)
        return self.log_start_offset

    def apply_retention(self, now_ms: int, high_watermark: int | None = None, *,
                        size_only: bool = False) -> int:
        """retention.ms (unless `size_only`) then retention.bytes, deleting whole batches from the
        front. Returns how many."""
        config = self.config
        if not config.deletes:
            return 0
        limit = self.log_end_offset if high_watermark is None else high_watermark
        dropped = 0
        if config.retention_ms >= 0 and not size_only:
            retention_ms = config.retention_ms
            dropped += self._drop_front(
                lambda b: b.last_offset < limit and now_ms - b.max_timestamp > retention_ms)
        if config.retention_bytes >= 0:
            retention_bytes = config.retention_bytes
            dropped += self._drop_front(
                lambda b: b.last_offset < limit and self.size_bytes - b.size >= retention_bytes)
        if dropped:
            self._start_at_first_batch()
        return dropped

    def evict_to(self, share: int) -> int:
        """LogMemory's cap: drop the oldest batches below the high watermark while the log holds
        more than `share` bytes. Returns how many."""
        limit = self.high_watermark_of()
        dropped = self._drop_front(lambda b: self.held_bytes > share and b.last_offset < limit)
        if dropped:
            self._start_at_first_batch()
        return dropped

    def spill_to(self, share: int, spill: SpillDir) -> int:
        """LogMemory's cap (log.memory.overflow=spill): move the oldest batches' bytes to a
        segment file in `spill`, read from there after (log/spill.py), while the log holds more
        than `share` bytes. Nothing is deleted and no offset moves. Returns how many."""
        stored = self._stored
        i = max(bisect_right(self._bases, self._spilled_end, self._head) - 1, self._head)
        picked = []
        # At least spill.min_bytes a file (or all there is): each file is a mapping, and a
        # process has a bounded number of them (vm.max_map_count).
        if self.held_bytes - self._spilling <= share:
            return 0                    # what is being written already brings it down
        excess = self.held_bytes - self._spilling - share
        file_bytes = spill.min_bytes
        while i < len(stored) and (excess > 0 or file_bytes > 0):
            batch = stored[i]
            i += 1
            if not isinstance(batch, SpillFile):
                picked.append(batch)
                excess -= batch.held - SPILLED_BATCH_OVERHEAD
                file_bytes -= batch.size
        if not picked:
            return 0
        # Not picked again while their file is written (nor after: they are spilled then).
        self._spilled_end = max(self._spilled_end, picked[-1].last_offset + 1)
        spilling = sum(b.held - SPILLED_BATCH_OVERHEAD for b in picked)
        self._spilling += spilling
        if spill.write_in_background(self.topic, self.partition, picked,
                                     lambda file: self._spilled(picked, file, spilling)):
            return len(picked)
        try:
            file: SpillFile | None = spill.write(self.topic, self.partition, picked)
        except OSError as e:            # disk full, no mapping left: kept in memory, not lost
            spill.failed(self.topic, self.partition, e)
            file = None
        self._spilled(picked, file, spilling)
        return len(picked) if file is not None else 0

    def _spilled(self, picked: list[StoredBatch], file: SpillFile | None, spilling: int) -> None:
        """The picked batches' file is written (their bytes are there now) or could not be
        (None: they stay in memory, to be picked again). The slot of each still in this log
        holds the file from now on; those no longer in it, or rewritten meanwhile, are left
        alone."""
        self._spilling -= spilling
        if file is None:
            self._spilled_end = min(self._spilled_end, picked[0].base_offset)
            return
        freed = 0
        stored, bases, head = self._stored, self._bases, self._head
        for batch in picked:
            i = bisect_left(bases, batch.base_offset, head)
            if i < len(stored) and stored[i] is batch:
                freed += batch.held - SPILLED_BATCH_OVERHEAD
                stored[i] = file
                self._spilled_below = max(self._spilled_below, i + 1)
                if batch.delete_horizon >= 0:
                    file.horizons[batch.base_offset] = batch.delete_horizon
        self.held_bytes -= freed
        self.memory.spilled(freed)

    def _start_at_first_batch(self) -> None:
        """After whole batches were dropped from the front: the log starts at what is left."""
        start = self._bases[self._head] if self.batch_count else self.log_end_offset
        if start > self.log_start_offset:
            self.log_start_offset = start
            self.epochs.truncate_from_start(start)
            self.txn_index.drop_before(start)

    def _drop_front(self, should_drop: Callable[[StoredBatch], bool]) -> int:
        stored = self._stored
        head = start = self._head
        freed = 0
        while head < len(stored):
            batch = self._batch(head)
            if not should_drop(batch):
                break
            stored[head] = None  # type: ignore[call-overload]  # its memory goes back now, not at the next compaction
            self.size_bytes -= batch.size
            self.held_bytes -= batch.held
            freed += batch.held
            head += 1
        self.memory.released(freed)
        dropped = head - start
        if head * 2 > len(stored):      # amortised O(1) per dropped batch
            del stored[:head], self._bases[:head]
            self._spilled_below = max(0, self._spilled_below - head)
            head = 0
        self._head = head
        return dropped

    def _rebuild_producers(self, producer_ids: set[int]) -> None:
        """Rebuild the state of `producer_ids` from the batches left (newest first, current epoch only)."""
        if not producer_ids:
            return
        self.producers.remove(producer_ids)
        found: dict[int, list[BatchMetadata]] = {}
        epochs: dict[int, int] = {}
        done: set[int] = set()
        for i in range(len(self._stored) - 1, self._head - 1, -1):
            if len(done) == len(producer_ids):
                break
            b = self._batch(i)
            pid = b.producer_id
            if pid not in producer_ids or pid in done:
                continue
            if epochs.setdefault(pid, b.producer_epoch) != b.producer_epoch:
                done.add(pid)
                continue
            metas = found.setdefault(pid, [])
            last_seq = increment_sequence(b.base_sequence, b.last_offset - b.base_offset)
            metas.append(BatchMetadata(b.base_sequence, last_seq, b.base_offset, b.last_offset, b.max_timestamp))
            if len(metas) == 5:
                done.add(pid)
        for pid, metas in found.items():
            self.producers.restore(ProducerStateEntry(pid, epochs[pid], reversed(metas)))

    # -- timestamps and epochs -------------------------------------------------------------------------

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets by time: the earliest offset (>= log start) whose record timestamp >= `timestamp`,
        with that timestamp; None if there is none. Linear in batches, reads records of one batch."""
        start = self.log_start_offset
        for batch in self._live():
            if batch.max_timestamp < timestamp:
                continue
            if batch.timestamp_type == LOG_APPEND_TIME:
                return max(batch.base_offset, start), batch.max_timestamp
            for offset, ts in record_timestamps(batch.data):
                if ts >= timestamp and offset >= start:
                    return offset, ts
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """ListOffsets MAX_TIMESTAMP (-3): the first record with the largest timestamp; None if empty."""
        best: StoredBatch | None = None
        for batch in self._live():
            if best is None or batch.max_timestamp > best.max_timestamp:
                best = batch
        if best is None:
            return None
        if best.timestamp_type != LOG_APPEND_TIME:
            for offset, ts in record_timestamps(best.data):
                if ts == best.max_timestamp and offset >= self.log_start_offset:
                    return offset, ts
        return max(best.base_offset, self.log_start_offset), best.max_timestamp

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (largest epoch <= `epoch`, its end offset); (-1, -1) if unknown."""
        return self.epochs.end_offset_for(epoch, self.log_end_offset)
