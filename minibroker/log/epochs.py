"""Leader epoch cache: which leader epoch started at which offset (Kafka's LeaderEpochFileCache).

Entries are (epoch, start_offset), both strictly increasing. Used to answer OffsetForLeaderEpoch
(followers truncating after a leader change, consumers validating positions, KIP-320) and kept in
step with truncation and log start offset movement. In memory only.
"""
from __future__ import annotations

import bisect
from typing import NamedTuple

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    __slots__ = ("_epochs", "_starts", "latest_epoch")

    def __init__(self) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []
        # The latest epoch, or -1 (UNDEFINED_EPOCH) when the cache is empty: a plain attribute,
        # kept by every change below (each follower fetch reads it once per partition).
        self.latest_epoch = UNDEFINED_EPOCH

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(EpochEntry(e, s) for e, s in zip(self._epochs, self._starts))

    @property
    def earliest_epoch(self) -> int:
        return self._epochs[0] if self._epochs else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; returns whether the cache changed.

        As Kafka: a no-op when `epoch` is already the latest and starts no later; otherwise entries with
        epoch >= `epoch` or start offset >= `start_offset` are removed first, keeping both monotonic."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._starts[-1] >= start_offset):
            self._epochs.pop()
            self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        self.latest_epoch = epoch
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end_offset) as Kafka's LeaderEpochFileCache.endOffsetFor:

        - requested is -1, or larger than every known epoch, or the cache is empty -> (-1, -1);
        - requested is the latest epoch -> (requested, log_end_offset);
        - otherwise the largest known epoch <= requested, with the start offset of the next larger
          epoch as end offset; when requested is older than the first known epoch Kafka answers
          (requested, start offset of the first epoch), and so do we."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at `offset` was written in, or -1 if before the first entry."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after `end_offset` (the log was truncated to it)."""
        if end_offset < 0:
            return
        i = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[i:], self._starts[i:]
        self.latest_epoch = self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop entries wholly before it and move the entry
        covering it to start there."""
        i = bisect.bisect_right(self._starts, start_offset)
        if i == 0:
            return
        covering = self._epochs[i - 1]
        del self._epochs[:i], self._starts[:i]
        self._epochs.insert(0, covering)
        self._starts.insert(0, start_offset)

    def clear(self) -> None:
        self._epochs.clear()
        self._starts.clear()
        self.latest_epoch = UNDEFINED_EPOCH

    def __len__(self) -> int:
        return len(self._epochs)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({list(self.entries)})"
