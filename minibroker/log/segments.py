"""Segment files of one partition log on disk, laid out as Kafka lays them out.

    <dir>/<base offset, 20 digits>.log        the batches, exactly the bytes the log holds
    <dir>/<base offset, 20 digits>.index      offset index: (offset - base int32, position int32)
    <dir>/<base offset, 20 digits>.timeindex  time index: (max timestamp so far int64, offset - base int32)

An offset index entry is added once `index.interval.bytes` were written since the last one, and a
time index entry with it when the largest timestamp grew (Kafka's LogSegment.append). Kafka
preallocates its index files to segment.index.bytes and memory-maps them; here they are appended
to and only written (reads come from the memory the log keeps), so they are rebuilt, not trusted,
on recovery.

Writes are plain write(2) calls: a batch is in the kernel's page cache when its append returns, so
a killed process (SIGKILL) loses nothing; only fsync (flush) makes it survive a power loss.
"""
from __future__ import annotations

import os
import struct
from bisect import bisect_left
from typing import NamedTuple

from kafka.errors import CorruptRecordError, InvalidRecordError

from minibroker.log.batch import LOG_OVERHEAD, MIN_BATCH_LENGTH, BatchHeader, parse_batches

_INDEX_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_BATCH_LENGTH = struct.Struct(">i")


def segment_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def segment_bases(directory: str) -> list[int]:
    """The base offsets of the segments in `directory`, oldest first."""
    return sorted(int(name[:-4]) for name in os.listdir(directory)
                  if name.endswith(".log") and name[:-4].isdigit())


class Recovered(NamedTuple):
    headers: list[BatchHeader]
    valid_bytes: int            # where the last whole, valid batch ends
    problem: str | None         # why the scan stopped before the end of the file


def scan(buf: bytearray, next_offset: int, verify_crc: bool) -> Recovered:
    """Kafka's LogSegment.recover: every batch whole, its lengths and (`verify_crc`) CRC32C valid
    and its offsets past the previous batch's; stops at the first that is not."""
    view = memoryview(buf)
    headers: list[BatchHeader] = []
    pos, end = 0, len(buf)
    problem = None
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            problem = f"{end - pos} trailing bytes at position {pos}"
            break
        length = _BATCH_LENGTH.unpack_from(view, pos + 8)[0]
        if length < MIN_BATCH_LENGTH or pos + LOG_OVERHEAD + length > end:
            problem = f"a batch of length {length} at position {pos} does not fit the file"
            break
        try:
            [h] = parse_batches(view[pos:pos + LOG_OVERHEAD + length], verify_crc=verify_crc)
        except (CorruptRecordError, InvalidRecordError) as e:
            problem = f"position {pos}: {e}"
            break
        if h.base_offset < next_offset:
            problem = f"position {pos}: base offset {h.base_offset} below {next_offset}"
            break
        headers.append(h._replace(offset_in_buf=pos))
        next_offset = h.last_offset + 1
        pos += h.size
    view.release()
    return Recovered(headers, pos, problem)


class LogSegment:
    """One segment: its three files, open for appending, and where each batch starts in it."""

    def __init__(self, directory: str, base_offset: int, index_interval_bytes: int,
                 created_ms: int) -> None:
        self.base_offset = base_offset
        self.created_ms = created_ms
        self.index_interval_bytes = index_interval_bytes
        self.paths = tuple(os.path.join(directory, segment_name(base_offset, s))
                           for s in (".log", ".index", ".timeindex"))
        # The log file keeps what it holds (its caller tracks those batches); the indexes are
        # rebuilt as that happens.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        self._fds = [os.open(p, flags | (os.O_TRUNC if i else 0), 0o644)
                     for i, p in enumerate(self.paths)]
        self.size = 0
        # Each batch's base offset, file position and max timestamp (truncation cuts these).
        self.bases: list[int] = []
        self.positions: list[int] = []
        self.stamps: list[int] = []
        self.next_offset = base_offset
        self.max_timestamp = -1
        self._offset_of_max_ts = base_offset
        self._index: list[int] = []         # file positions the offset index has entries for
        self._time_index: list[tuple[int, int]] = []    # the time index: (offset, timestamp)
        self._since_index = 0

    @property
    def fd(self) -> int:
        return self._fds[0]

    def append(self, data: bytes | bytearray | memoryview, base_offset: int, last_offset: int,
               max_timestamp: int) -> None:
        written = os.write(self._fds[0], data)
        while written < len(data):          # a short write (rare on a file): the rest
            written += os.write(self._fds[0], memoryview(data)[written:])
        self.track(base_offset, last_offset, max_timestamp, len(data))

    def track(self, base_offset: int, last_offset: int, max_timestamp: int, size: int) -> None:
        """A batch now at the end of the file: remember where, and index it."""
        position = self.size
        if max_timestamp > self.max_timestamp:
            self.max_timestamp, self._offset_of_max_ts = max_timestamp, last_offset
        if self._since_index > self.index_interval_bytes or not self.bases:
            os.write(self._fds[1], _INDEX_ENTRY.pack(base_offset - self.base_offset, position))
            self._index.append(position)
            if not self._time_index or self.max_timestamp > self._time_index[-1][1]:
                os.write(self._fds[2], _TIME_ENTRY.pack(
                    self.max_timestamp, self._offset_of_max_ts - self.base_offset))
                self._time_index.append((self._offset_of_max_ts, self.max_timestamp))
            self._since_index = 0
        self._since_index += size
        self.bases.append(base_offset)
        self.positions.append(position)
        self.stamps.append(max_timestamp)
        self.size = position + size
        self.next_offset = last_offset + 1

    def truncate_to(self, offset: int) -> None:
        """Drop every batch with a base offset >= `offset` (callers cut at batch boundaries),
        and the index entries pointing at them."""
        i = bisect_left(self.bases, offset)
        if i == len(self.bases):
            return
        position = self.positions[i]
        os.ftruncate(self._fds[0], position)
        del self.bases[i:], self.positions[i:], self.stamps[i:]
        self.size = position
        self.next_offset = offset if self.bases else self.base_offset
        del self._index[bisect_left(self._index, position):]
        del self._time_index[bisect_left(self._time_index, offset, key=lambda e: e[0]):]
        os.ftruncate(self._fds[1], len(self._index) * _INDEX_ENTRY.size)
        os.ftruncate(self._fds[2], len(self._time_index) * _TIME_ENTRY.size)
        self.max_timestamp = max(self.stamps, default=-1)
        if self.stamps:
            self._offset_of_max_ts = self.bases[self.stamps.index(self.max_timestamp)]
        self._since_index = self.index_interval_bytes + 1       # index the next batch

    def flush(self) -> None:
        for fd in self._fds:
            os.fsync(fd)

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    def delete(self) -> None:
        if self._fds:
            self.close()
        for p in self.paths:
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass


def read_file(path: str) -> bytearray:
    with open(path, "rb") as f:
        return bytearray(f.read())
