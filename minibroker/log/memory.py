"""The bytes a broker's partition logs hold in memory, and a broker-wide cap on them.

`log.memory.max.bytes` (a minibroker extension; -1, the default, means no cap) bounds an
in-memory broker the way a disk bounds Kafka: past it, the oldest batches of the whole broker are
deleted first, whatever their partition, as retention deletes them (the log start offset moves;
nothing above a partition's high watermark is deleted). Memory freed that way is reused by the next
batches, which costs a tenth of touching fresh pages (benchmarks/README.md), and the newest data
of every partition stays readable.
"""
from __future__ import annotations

import ctypes
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minibroker.log.partition_log import PartitionLog


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3     # glibc's mallopt parameters
_LARGEST_BATCH_FROM_HEAP = 32 * 1024 * 1024       # glibc's DEFAULT_MMAP_THRESHOLD_MAX (64-bit)


def keep_freed_batches_for_reuse() -> bool:
    """Ask glibc to serve every batch-sized allocation from its heap and keep freed heap memory:
    by default a batch over 128 KiB gets its own mmap, fresh pages that are faulted in on the copy
    (0.5 s per GB here, more than the rest of a produce) and unmapped when the batch is deleted,
    so deleted batches' memory is never reused. A served broker calls this at start; False where
    the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, _LARGEST_BATCH_FROM_HEAP)) and \
        bool(mallopt(_M_TRIM_THRESHOLD, 4 * _LARGEST_BATCH_FROM_HEAP))


class LogMemory:
    def __init__(self, max_bytes: int = -1) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        # (log, base offset) of every batch stored while capped, oldest first; entries of batches
        # already gone (retention, truncation) are skipped when they reach the front.
        self._order: deque[tuple["PartitionLog", int]] = deque()

    def stored(self, log: "PartitionLog", base_offset: int, size: int) -> None:
        self.used += size
        if self.max_bytes >= 0:
            self._order.append((log, base_offset))

    def released(self, size: int) -> None:
        self.used -= size

    def maybe_evict(self) -> int:
        """Delete the broker's oldest batches while over the cap. Returns how many were deleted."""
        if self.max_bytes < 0 or self.used <= self.max_bytes:
            return 0
        order = self._order
        evicted = 0
        while self.used > self.max_bytes and order:
            log, base_offset = order[0]
            outcome = log.evict_oldest(base_offset)
            if outcome is False:
                break                   # the oldest batch is above its high watermark: wait
            order.popleft()
            evicted += outcome is True
        return evicted
