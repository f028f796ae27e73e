"""Where in-memory logs put their oldest batches past `log.memory.max.bytes` (log.memory.overflow
=spill, the default): segment files in a directory of their own, read back through mmap.

A spill writes a run of one log's oldest batches, as the raw bytes they hold (the format of a
Kafka `.log` segment and of log/segments.py), to `<dir>/<topic>-<partition>/<base offset>.log`,
maps the file read-only and returns a SpillFile: the log keeps it in each of those batches'
places and makes a batch of it (its header's fields read from the mapping) when the batch is
asked for, so a spilled batch holds ~48 bytes of the process's memory, and the pages are the kernel's page cache, which
it writes back and drops under memory pressure instead of the process's own memory. A file is unlinked once nothing refers to
its mapping (every batch in it deleted by retention, truncation or the topic's deletion); the
directory is created at the first spill (a temporary one, `minibroker-spill-*`, under TMPDIR)
and removed when the broker stops, or at exit.

The file is written with O_DIRECT where the file system takes it, through one reused
block-aligned buffer: a buffered write allocates a page-cache page for every 4 KiB written, which
cost 1.46 CPU s per GB on the benchmarks' VM (dd), ten times the direct write's 0.14, and made a
3-broker serve take 10 KiB records at half the speed once past the cap (docs/performance.md).
The pages come back from the disk when a spilled batch is read. A broker (a running event loop)
writes in a thread of its own (`write_in_background`): the disk's time is not the loop's, and the
batches stay in memory, and counted, until their file is written.
"""
from __future__ import annotations

import array
import asyncio
import bisect
import errno
import logging
import mmap
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

log = logging.getLogger("minibroker.log")

REPORT_EVERY = 1000                     # failed spills per ERROR line
MIN_FILE_BYTES = 4 << 20
_BLOCK = 4096                           # O_DIRECT's alignment of memory, offsets and lengths
_BOUNCE_BYTES = 4 << 20                 # the reused aligned buffer direct writes go through


class SpillFile:
    """A written spill file's read-only mapping, and each batch in it: its base and last offsets
    and where it starts, by index in the file.

    A log keeps this one object in place of each of the file's batches (log.partition_log's
    _stored) and makes a SpilledBatch of it when the batch is asked for. A StoredBatch kept per
    spilled batch held 432 bytes, and its memoryview is one that the cycle collector walks
    (CPython cannot untrack one: its dealloc assumes it is tracked): the millions of spilled
    single-record batches of a long run grew the process by a gigabyte an hour past the cap and
    made full collections take seconds. What stays per batch is 24 bytes here and the log's
    slots."""
    __slots__ = ("whole", "bases", "lasts", "positions", "horizons", "_next")

    def __init__(self, whole: memoryview, bases: array.array[int], lasts: array.array[int],
                 positions: array.array[int]) -> None:
        self.whole = whole
        self.bases, self.lasts, self.positions = bases, lasts, positions
        # Compaction's delete horizons (log/cleaner.py) of the batches that have one.
        self.horizons: dict[int, int] = {}
        self._next = 0                  # the index after the last one asked for

    def index_of(self, base_offset: int) -> int:
        """The index of the batch at `base_offset` (one of this file's). Reads go in offset
        order: the one after the last asked for is tried first (a bisection of an array makes
        an int per step)."""
        j = self._next
        if j >= len(self.bases) or self.bases[j] != base_offset:
            j = bisect.bisect_left(self.bases, base_offset)
        self._next = j + 1
        return j

    def end_of(self, j: int) -> int:
        return self.positions[j + 1] if j + 1 < len(self.positions) else len(self.whole)

    def __len__(self) -> int:
        return len(self.positions)

    def __iter__(self) -> Iterator[memoryview]:
        """Each batch's bytes, in the order written."""
        return (self.whole[self.positions[j]:self.end_of(j)] for j in range(len(self)))


def _write_all(fd: int, buf: mmap.mmap, n: int, at: int) -> int:
    with memoryview(buf) as whole:
        done = 0
        while done < n:
            done += os.pwrite(fd, whole[done:n], at + done)
    return n


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass            # the directory went first (the broker stopped)


class SpillDir:
    def __init__(self, parent: str | None = None) -> None:
        self.parent = parent
        self.path: str | None = None
        self.files = 0                  # spill files written, in all
        self.bytes = 0                  # bytes written to them, in all
        self.failures = 0               # spills that could not be written (OSError)
        # The least a spill file holds (unless its log has less): each file is a mapping, and
        # a process has a bounded number of them (vm.max_map_count, 65530 by default).
        self.min_bytes = MIN_FILE_BYTES
        self.direct = hasattr(os, "O_DIRECT")   # False after a file system refused it
        self._bounce: mmap.mmap | None = None
        self.in_flight = 0                      # bytes handed to the writer thread, not written yet
        self._writer: ThreadPoolExecutor | None = None
        self._finalizer: weakref.finalize[..., Any] | None = None

    def _directory(self) -> str:
        if self.path is None:
            self.path = tempfile.mkdtemp(prefix="minibroker-spill-", dir=self.parent)
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)
            log.info("log memory past log.memory.max.bytes: spilling the oldest batches to %s",
                     self.path)
        return self.path

    def write(self, topic: str, partition: int, batches: Sequence[Any]) -> SpillFile:
        """Write `batches` (StoredBatches, in offset order) to a new segment file and return its
        mapping, with where each one's bytes start in it."""
        folder = os.path.join(self._directory(), f"{topic}-{partition}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{batches[0].base_offset:020d}.log")
        n = 0
        while os.path.exists(path):     # a file of the same base still mapped (a truncation)
            n += 1
            path = os.path.join(folder, f"{batches[0].base_offset:020d}.{n}.log")
        size = sum(b.size for b in batches)
        if not (self.direct and self._write_direct(path, batches, size)):
            with open(path, "wb") as f:
                f.writelines(b.view for b in batches)
        with open(path, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
            # Read back in offset order by consumers: the kernel reads ahead further and
            # faults less than for a mapping it sees read at random.
            mapped.madvise(mmap.MADV_SEQUENTIAL)
        weakref.finalize(mapped, _unlink, path)
        bases, lasts, positions = array.array("q"), array.array("q"), array.array("q")
        pos = 0
        for b in batches:
            bases.append(b.base_offset)
            lasts.append(b.last_offset)
            positions.append(pos)
            pos += b.size
        self.files += 1
        self.bytes += pos
        return SpillFile(memoryview(mapped), bases, lasts, positions)

    def write_in_background(self, topic: str, partition: int, batches: Sequence[Any],
                            done: Callable[[SpillFile | None], None]) -> bool:
        """`write` in the writer thread when an event loop runs here (False: none; call write);
        `done(file)` then runs on the loop, `done(None)` when the write failed (`failed`)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if self._writer is None:
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="minibroker-spill")
        size = sum(b.size for b in batches)
        self.in_flight += size
        future = self._writer.submit(self.write, topic, partition, batches)

        def finished(_: Any) -> None:
            if loop.is_closed():
                return
            try:
                loop.call_soon_threadsafe(settle)
            except RuntimeError:        # the loop closed meanwhile
                pass

        def settle() -> None:
            self.in_flight -= size
            e = None if future.cancelled() else future.exception()     # cancelled: at close
            if future.cancelled() or e is not None:
                if isinstance(e, OSError):
                    self.failed(topic, partition, e)
                elif e is not None:
                    log.error("spilling %s-%d failed; its batches stay in memory", topic,
                              partition, exc_info=e)
                done(None)
            else:
                done(future.result())
        future.add_done_callback(finished)
        return True

    def _write_direct(self, path: str, batches: Sequence[Any], size: int) -> bool:
        """Write the batches' bytes to a new file at `path` with O_DIRECT (False, and nothing
        left at `path`, where the file system does not take it: tmpfs, some overlays)."""
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_DIRECT, 0o644)
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
            self.direct = False
            return False
        try:
            if self._bounce is None:
                self._bounce = mmap.mmap(-1, _BOUNCE_BYTES)     # page-aligned, kept
            bounce = self._bounce
            at = filled = 0
            for b in batches:
                view = b.view
                pos = 0
                while pos < len(view):
                    n = min(len(view) - pos, _BOUNCE_BYTES - filled)
                    bounce[filled:filled + n] = view[pos:pos + n]
                    filled += n
                    pos += n
                    if filled == _BOUNCE_BYTES:
                        at += _write_all(fd, bounce, filled, at)
                        filled = 0
            if filled:              # the tail, padded to a block, then cut back to `size`
                padded = -(-filled // _BLOCK) * _BLOCK
                bounce[filled:padded] = bytes(padded - filled)
                _write_all(fd, bounce, padded, at)
                os.ftruncate(fd, size)
        except OSError as e:
            os.close(fd)
            os.unlink(path)
            if e.errno != errno.EINVAL:
                raise
            self.direct = False
            return False
        os.close(fd)
        return True

    def failed(self, topic: str, partition: int, e: OSError) -> None:
        """A spill that could not be written: the batches stay in memory (nothing is dropped),
        one ERROR line per REPORT_EVERY failures."""
        self.failures += 1
        if self.failures % REPORT_EVERY == 1:
            log.error("cannot spill %s-%d past log.memory.max.bytes to %s: %r (%d failures so "
                      "far); its batches stay in memory", topic, partition, self.path, e,
                      self.failures)

    def close(self) -> None:
        """Remove the directory and what is in it (mappings still open keep their pages: the
        batches stay readable); a later spill makes a new one."""
        if self._writer is not None:
            self._writer.shutdown(wait=True, cancel_futures=True)
            self._writer = None
        if self._finalizer is not None:
            self._finalizer()
        self.path = self._finalizer = None
