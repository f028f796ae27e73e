"""The bytes a broker's partition logs hold in memory, and a broker-wide cap on them.

`log.memory.max.bytes` (a minibroker extension; -1, the default, means no cap) bounds the memory
an in-memory broker's logs hold, never the data: nothing acknowledged is deleted before a
retention the user set. It counts what the batches really hold (StoredBatch.held: the whole frame
an adopted batch keeps alive, plus per-batch objects), not their wire size. Past it, the oldest
batches of the partitions holding the most go to files (`log.memory.overflow=spill`, the
default; log/spill.py: they stay readable, through a read-only mapping of their segment file),
down to an equal share of the cap for each partition that holds more than that share (max-min
fairness: a partition holding less keeps everything). A round frees a sixteenth of the cap, so
the next rounds are that many bytes away. Memory freed that way is reused by the next batches,
which costs a tenth of touching fresh pages (benchmarks/README.md). What a spilled batch still
holds (its slots, SPILLED_BATCH_OVERHEAD: ~48 bytes) stays counted and cannot go.

`log.memory.overflow=delete` is the explicit opt-in to eviction: the oldest batches are deleted
instead, as if a retention had been set (the log start offset moves; nothing above a partition's
high watermark goes). In that mode, what sits above a high watermark cannot go: while followers are behind (acks=0/1 producers
outrun replication; an in-process RF 3 cluster shares one core), a round frees too little and the
logs grew without bound (9 GB of RSS under a 3 GB cap). Past the cap by more than a sixteenth,
producers are held back instead, as Kafka's quotas mute a channel: each Produce answer waits
(`room`, at most a second) until a moved high watermark lets a round bring the logs back under
the cap, and the followers get the time to catch up.
"""
from __future__ import annotations

import asyncio
import ctypes
import os
from typing import Protocol

from minibroker.log.heap import HEAP
from minibroker.log.spill import SpillDir

SPILL, DELETE = "spill", "delete"           # log.memory.overflow
OVERFLOW_POLICIES = (SPILL, DELETE)


class EvictableLog(Protocol):
    """What LogMemory needs of a log (PartitionLog is one; it imports this module, not we it)."""
    topic: str
    partition: int
    held_bytes: int         # what its batches really hold: the rounds share the cap by this

    def evict_to(self, share: int) -> int:
        """Delete the oldest batches below the high watermark down to `share` bytes; how many."""

    def spill_to(self, share: int, spill: SpillDir) -> int:
        """Move the oldest batches' bytes to `spill` down to `share` bytes held; how many."""


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3     # glibc's mallopt parameters
_LARGEST_BATCH_FROM_HEAP = 32 * 1024 * 1024       # glibc's DEFAULT_MMAP_THRESHOLD_MAX (64-bit)
_KEEP_FREED = 1 << 30                             # free heap top kept before it is trimmed


def keep_freed_batches_for_reuse(huge_pages: bool = False) -> bool:
    """Ask glibc to serve every batch-sized allocation from its heap and keep freed heap memory:
    by default a batch over 128 KiB gets its own mmap, fresh pages that are faulted in on the copy
    (0.5 s per GB here, more than the rest of a produce) and unmapped when the batch is deleted,
    so deleted batches' memory is never reused. `huge_pages` (the config
    minibroker.log.heap.huge.pages, off by default) also gives the heap huge pages where the kernel
    grants them (heap.py): measured side by side on this VM they cost more than they save (a
    3-broker serve took 10 KiB produce at 0.4x the speed, 100 B produce at twice the broker CPU;
    docs/performance.md). A served broker calls this at start; False where the C library is not
    glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    kept = bool(mallopt(_M_MMAP_THRESHOLD, _LARGEST_BATCH_FROM_HEAP)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, _KEEP_FREED))
    if kept and huge_pages:
        HEAP.enable()
    return kept


_DEFAULT_SHARE_OF_MEMORY = 8                     # serve's default cap: 1/8 of physical memory...
_DEFAULT_MAX_IN_ALL = 1 << 30                     # ...at most 1 GiB for all the brokers...
_DEFAULT_MIN_PER_BROKER = 64 << 20                # ...at least 64 MiB each


def default_max_bytes(brokers: int) -> int:
    """`minibroker serve`'s log.memory.max.bytes when none is given: an eighth of the machine's
    physical memory (read once, at start), at most 1 GiB, shared by the process's brokers, at
    least 64 MiB each; -1 (no cap) where the size cannot be read. The budget is the machine's:
    three brokers on one machine get what one would, not three times it. Unbounded, every GiB
    stored costs fresh pages (0.5-2.5 s per GB on the benchmarks' VM, more than the rest of a
    produce); capped, deleted batches' memory is reused (docs/performance.md)."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return -1
    if physical <= 0:
        return -1
    share = min(_DEFAULT_MAX_IN_ALL, physical // _DEFAULT_SHARE_OF_MEMORY) // max(1, brokers)
    return max(_DEFAULT_MIN_PER_BROKER, share)


class LogMemory:
    def __init__(self, max_bytes: int = -1, overflow: str = SPILL) -> None:
        assert overflow in OVERFLOW_POLICIES, overflow
        self.max_bytes = max_bytes
        self.overflow = overflow
        self.spill = SpillDir() if overflow == SPILL else None     # its directory: at first use
        self.used = 0
        # A round starts past this: the cap, or, after a round that the high watermarks stopped
        # short of it, a sixteenth of the cap further (not a futile round on every append).
        self._threshold = max_bytes
        self._logs: dict[int, EvictableLog] = {}      # every log sharing this memory, by id
        self._room_waiters: list[asyncio.Future[None]] = []     # producers held back (`room`)
        self._round_due = False

    def register(self, log: EvictableLog) -> None:
        self._logs[id(log)] = log

    def unregister(self, log: EvictableLog) -> None:
        self._logs.pop(id(log), None)

    def stored(self, size: int) -> None:
        self.used += size
        if HEAP.on:
            HEAP.stored(size)

    def released(self, size: int) -> None:
        self.used -= size
        if self._room_waiters and (self.used <= self.max_bytes or self._writer_caught_up()):
            waiters, self._room_waiters = self._room_waiters, []
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def spilled(self, size: int) -> None:
        """A spill's file was written: its batches' bytes no longer count (the next round
        starts at the cap again)."""
        self.released(size)
        if self.used <= self.max_bytes:
            self._threshold = self.max_bytes

    def over(self) -> bool:
        """Past the cap by more than a round's slack even after a round now (high watermarks may
        have moved since the last): the rest is above high watermarks."""
        limit = self.max_bytes + self.max_bytes // 16
        if self.max_bytes < 0 or self.used <= limit:
            return False
        if self.spill is not None:
            # Spilling does not wait for high watermarks, but for the disk: producers wait while
            # the writer thread has more than a quarter of the cap to write (else memory would
            # grow with a disk slower than the producers); what is left beyond that is what no
            # round can free (spilled batches' objects), which holding producers back would not
            # change.
            return not self._writer_caught_up()
        self._evict()
        return self.used > limit

    def _writer_caught_up(self) -> bool:
        return self.spill is not None and self.spill.in_flight <= self.max_bytes // 4

    async def room(self, timeout_s: float) -> None:
        """Until a round brings the logs back under the cap, or `timeout_s`."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._room_waiters.append(fut)
        timer = loop.call_later(timeout_s, _done, fut)
        try:
            await fut
        finally:
            timer.cancel()

    def high_watermark_moved(self) -> None:
        """A partition's high watermark moved: with producers held back, its batches below it may
        now go (appends, which start rounds otherwise, are what is held back). One round per
        loop pass, however many high watermarks moved in it (a round sorts every log)."""
        if self._room_waiters and self.used > self.max_bytes and not self._round_due:
            self._round_due = True
            asyncio.get_running_loop().call_soon(self._held_round)

    def _held_round(self) -> None:
        self._round_due = False
        self._room_waiters = [f for f in self._room_waiters if not f.done()]
        if self._room_waiters and self.used > self.max_bytes:
            self._evict()

    def maybe_evict(self) -> int:
        """Past the cap: spill (or delete) the oldest batches of the largest logs down to their
        fair share of the cap less a sixteenth. Returns how many batches went."""
        if self.max_bytes < 0 or self.used <= max(self.max_bytes, self._threshold):
            return 0
        return self._evict()

    def _evict(self) -> int:
        evicted = self._round()
        self._threshold = self.max_bytes if self.used <= self.max_bytes else \
            self.used + self.max_bytes // 16
        return evicted

    def _round(self) -> int:
        logs = sorted(self._logs.values(), key=lambda log: (log.held_bytes, log.topic, log.partition))
        room = self.max_bytes - self.max_bytes // 16
        for i, log in enumerate(logs):
            share = room // (len(logs) - i)
            if log.held_bytes > share:
                break                   # this log and every larger one keep `share` each
            room -= log.held_bytes
        else:
            return 0
        if self.spill is not None:
            return sum(log.spill_to(share, self.spill) for log in logs[i:])
        return sum(log.evict_to(share) for log in logs[i:])

    def close(self) -> None:
        """The broker stopped: its spill directory goes."""
        if self.spill is not None:
            self.spill.close()


def _done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
