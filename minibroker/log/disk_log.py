"""A partition log kept in segment files (log/segments.py) as well as in memory: `serve --data-dir`.

The batches stay in memory exactly as PartitionLog keeps them (reads and the hot paths are its
own); every stored batch is also written, as the raw bytes held, to the active segment. So
everything can be rebuilt from the files, which is what opening a log does (Kafka's
LogLoader): every segment is read back; those past the recovery point (what the last flush
covered) are validated batch by batch (lengths, CRC32C, offsets), a torn or corrupt tail is cut
off at the last whole batch and any later segment deleted; the indexes are rebuilt; leader epochs
come from the batches and the leader-epoch-checkpoint, producer state (idempotence,
transactions) from the batches.

Decisions:
- Segments roll at `segment.bytes` / `segment.ms` (the latter counted from the segment's
  creation on the cluster clock, not its first record's timestamp) or when an offset no longer
  fits the index's 32-bit relative offset.
- Retention deletes whole segments, never the active one (Kafka deletes an expired active segment
  after rolling it); DeleteRecords moves the log start offset and deletes the segments wholly
  below it, the start offset itself survives in the broker's log-start-offset-checkpoint.
- fsync: after `flush.messages` messages (log.flush.interval.messages), after `flush.ms`
  (LogManager's checkpoint tick), when a segment rolls, and at a clean shutdown; by default, as
  Kafka, never per write.
- `log.memory.max.bytes` neither evicts nor spills from these logs: they keep every batch in
  memory too, so retention is what bounds them (reading old batches back from these segments, as
  log/spill.py does from its own, is not built yet).
- Compaction swaps a cleaned segment in through a `.cleaned` file renamed over the old one.
"""
from __future__ import annotations

import logging
import os
import shutil
from typing import Any

from minibroker.log.batch import INT32_MAX
from minibroker.log.config import LogConfig
from minibroker.log.memory import LogMemory
from minibroker.log.partition_log import PartitionLog, StoredBatch
from minibroker.log.segments import LogSegment, read_file, scan, segment_bases, segment_name

log = logging.getLogger("minibroker.log")

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


def write_atomically(path: str, text: str) -> None:
    """Write a checkpoint file whole or not at all (temp file, fsync, rename)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def checkpoint_text(entries: list[tuple[Any, ...]]) -> str:
    """Kafka's CheckpointFile format: version 0, the entry count, one entry per line."""
    return "".join(["0\n", f"{len(entries)}\n"] + [" ".join(map(str, e)) + "\n" for e in entries])


def read_checkpoint(path: str) -> list[list[str]]:
    """The entries of a checkpoint file, [] if it is missing or not whole."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    if len(lines) < 2 or lines[0] != "0" or not lines[1].isdigit() or \
            len(lines) - 2 != int(lines[1]):
        return []
    return [line.split() for line in lines[2:]]


class DiskPartitionLog(PartitionLog):
    def __init__(self, topic: str, partition: int, config: LogConfig, clock: Any, directory: str, *,
                 memory: LogMemory | None = None, recovery_point: int = 0, log_start_offset: int = 0,
                 high_watermark: int = 0) -> None:
        super().__init__(topic, partition, config, clock, memory=memory)
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self.segments: list[LogSegment] = []
        self.recovery_point = recovery_point
        self.unflushed_messages = 0
        self.last_flush_ms = self._now()
        self.truncated_bytes = 0            # what recovery cut off (a torn or corrupt tail)
        self._load(log_start_offset)
        self.recovered_high_watermark = min(high_watermark, self.log_end_offset)
        self.write_epochs()

    def _now(self) -> int:
        return self.clock.now_ms() if self.clock is not None else 0

    # -- loading (Kafka's LogLoader) -------------------------------------------------------------------

    def _load(self, checkpointed_start: int) -> None:
        bases = segment_bases(self.directory)
        start = bases[0] if bases else checkpointed_start
        self.log_start_offset = self.log_end_offset = start
        for i, base in enumerate(bases):
            path = os.path.join(self.directory, segment_name(base, ".log"))
            buf = read_file(path)
            after_recovery_point = i + 1 == len(bases) or bases[i + 1] > self.recovery_point
            found = scan(buf, self.log_end_offset, verify_crc=after_recovery_point)
            if found.problem is not None:
                log.warning("%s-%d: segment %d: %s; truncating it to %d of %d bytes%s", self.topic,
                            self.partition, base, found.problem, found.valid_bytes, len(buf),
                            f" and deleting {len(bases) - i - 1} later segments" if i + 1 < len(bases)
                            else "")
                os.truncate(path, found.valid_bytes)
                self.truncated_bytes += len(buf) - found.valid_bytes
            segment = LogSegment(self.directory, base, self.config.index_interval_bytes, self._now())
            self.segments.append(segment)
            view = memoryview(buf)
            for h in found.headers:
                data = view[h.offset_in_buf:h.offset_in_buf + h.size]
                PartitionLog._store(self, StoredBatch(data, h, h.base_offset, h.partition_leader_epoch,
                                                      h.max_timestamp, h.attributes))
                segment.track(h.base_offset, h.last_offset, h.max_timestamp, h.size)
                if h.partition_leader_epoch >= 0:
                    self.epochs.assign(h.partition_leader_epoch, h.base_offset)
            if self.log_end_offset < base:
                self.log_end_offset = base      # an empty segment (rolled, or cut to nothing)
            if found.problem is not None:
                for later in bases[i + 1:]:
                    LogSegment(self.directory, later, 0, 0).delete()
                break
        if not self.segments:
            self.segments.append(LogSegment(self.directory, start, self.config.index_interval_bytes,
                                            self._now()))
        self.recovery_point = min(self.recovery_point, self.log_end_offset)
        self._load_epochs()
        if checkpointed_start > self.log_start_offset:
            self.delete_records_before(min(checkpointed_start, self.log_end_offset))
        producers = {b.producer_id for b in self._live() if b.producer_id >= 0}
        self._rebuild_producers(producers)
        self._rebuild_transactions()

    def _load_epochs(self) -> None:
        """Epochs assigned with no batch yet (a leader that has not written) survive only in the
        checkpoint; those after the batches' are added."""
        latest = self.epochs.entries[-1] if len(self.epochs) else None
        for entry in read_checkpoint(os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT)):
            epoch, start = int(entry[0]), int(entry[1])
            if start <= self.log_end_offset and (latest is None or (
                    epoch > latest.epoch and start >= latest.start_offset)):
                self.epochs.assign(epoch, start)

    def write_epochs(self) -> None:
        write_atomically(os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT),
                         checkpoint_text(list(self.epochs.entries)))

    # -- appends ---------------------------------------------------------------------------------------

    def _store(self, batch: StoredBatch) -> None:
        super()._store(batch)
        segment = self.segments[-1]
        if segment.bases and (segment.size + batch.size > self.config.segment_bytes
                              or self._now() - segment.created_ms >= self.config.segment_ms
                              or batch.last_offset - segment.base_offset > INT32_MAX):
            segment = self._roll(batch.base_offset)
        segment.append(batch.data, batch.base_offset, batch.last_offset, batch.max_timestamp)
        self.unflushed_messages += batch.last_offset - batch.base_offset + 1
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _maybe_roll(self, batch: StoredBatch) -> None:
        """The segments on disk are the segments (see active_segment_base)."""

    @property
    def active_segment_base(self) -> int:
        return self.segments[-1].base_offset

    def _roll(self, base_offset: int) -> LogSegment:
        """A new active segment; the one it replaces is flushed (Kafka flushes it on roll), which
        moves the recovery point to it."""
        self.segments[-1].flush()
        self.recovery_point = max(self.recovery_point, base_offset)
        segment = LogSegment(self.directory, base_offset, self.config.index_interval_bytes, self._now())
        self.segments.append(segment)
        return segment

    def flush(self) -> None:
        """fsync every segment the recovery point has not passed; it moves to the log end."""
        for segment in self.segments:
            if segment.next_offset > self.recovery_point or segment is self.segments[-1]:
                segment.flush()
        self.recovery_point = self.log_end_offset
        self.unflushed_messages = 0
        self.last_flush_ms = self._now()

    # -- truncation, deletion, retention ---------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        changed = super().truncate_to(offset)
        if changed:
            end = self.log_end_offset
            while len(self.segments) > 1 and self.segments[-1].base_offset >= end:
                self.segments.pop().delete()
            self.segments[-1].truncate_to(end)
            self.recovery_point = min(self.recovery_point, end)
            self.write_epochs()
        return changed

    def truncate_fully_and_start_at(self, offset: int) -> None:
        super().truncate_fully_and_start_at(offset)
        for segment in self.segments:
            segment.delete()
        self.segments = [LogSegment(self.directory, offset, self.config.index_interval_bytes,
                                    self._now())]
        self.recovery_point = offset
        self.write_epochs()

    def delete_records_before(self, offset: int) -> int:
        start = super().delete_records_before(offset)
        self._delete_segments_below(start)
        return start

    def _delete_segments_below(self, offset: int) -> int:
        """Delete the segments wholly below `offset` (never the active one); how many."""
        n = 0
        while n + 1 < len(self.segments) and self.segments[n + 1].base_offset <= offset:
            self.segments[n].delete()
            n += 1
        del self.segments[:n]
        return n

    def apply_retention(self, now_ms: int, high_watermark: int | None = None, *,
                        size_only: bool = False) -> int:
        """Kafka's deleteRetentionMsBreachedSegments and deleteRetentionSizeBreachedSegments: whole
        segments from the oldest, each wholly below the high watermark, while its largest
        timestamp is older than retention.ms or the log stays >= retention.bytes without it."""
        config = self.config
        if not config.deletes:
            return 0
        limit = self.log_end_offset if high_watermark is None else high_watermark
        by_time = config.retention_ms >= 0 and not size_only
        total = sum(s.size for s in self.segments)
        n = 0
        for segment, following in zip(self.segments, self.segments[1:]):
            if following.base_offset > limit:
                break
            if not ((by_time and now_ms - segment.max_timestamp > config.retention_ms) or
                    (config.retention_bytes >= 0 and total - segment.size >= config.retention_bytes)):
                break
            total -= segment.size
            n += 1
        if not n:
            return 0
        start = self.segments[n].base_offset
        self._delete_segments_below(start)
        dropped = self._drop_front(lambda b: b.last_offset < start)
        self._start_at_first_batch()
        return dropped

    def evict_to(self, share: int) -> int:
        return 0        # see the module docstring: retention bounds a log on disk

    def spill_to(self, share: int, spill: Any) -> int:
        return 0        # its bytes are in its own segments already (module docstring)

    def replace_batches(self, replacements: dict[int, StoredBatch | None]) -> None:
        """Compaction: the cleaned batches replace the segments that held the old ones."""
        super().replace_batches(replacements)
        touched = sorted(replacements)
        for i, segment in enumerate(self.segments):
            end = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            if any(segment.base_offset <= b and (end is None or b < end) for b in touched):
                self.segments[i] = self._rewrite(segment, end)

    def _rewrite(self, segment: LogSegment, end: int | None) -> LogSegment:
        path = segment.paths[0]
        kept = [b for b in self.batches_from(segment.base_offset)
                if b.base_offset >= segment.base_offset and (end is None or b.base_offset < end)]
        with open(path + ".cleaned", "wb") as f:
            for b in kept:
                f.write(b.data)
            f.flush()
            os.fsync(f.fileno())
        segment.close()
        os.replace(path + ".cleaned", path)
        new = LogSegment(self.directory, segment.base_offset, self.config.index_interval_bytes,
                         segment.created_ms)
        for b in kept:
            new.track(b.base_offset, b.last_offset, b.max_timestamp, b.size)
        return new

    def close(self) -> None:
        """A clean shutdown: everything flushed, the files closed."""
        self.flush()
        self.write_epochs()
        for segment in self.segments:
            segment.close()

    def delete(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments = []
        shutil.rmtree(self.directory, ignore_errors=True)
        PartitionLog.truncate_fully_and_start_at(self, 0)
        self.memory.unregister(self)
