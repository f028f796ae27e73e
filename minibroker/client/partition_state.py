"""The consumer's state of one assigned partition: positions, the fetched records not yet
polled, and what KIP-253's ordering barrier reads and sets (gate, last epoch, reported)."""
from __future__ import annotations

import collections

from minibroker.client.records import ConsumerRecord


class PartitionState:
    __slots__ = ("position", "fetch_offset", "buffer", "inflight", "epoch", "reset",
                 "committed", "high_watermark", "gate", "last_epoch", "reported", "backoff_until")

    def __init__(self) -> None:
        self.position: int | None = None          # next offset poll() returns
        self.fetch_offset: int | None = None      # next offset to fetch
        self.buffer: collections.deque[ConsumerRecord] = collections.deque()
        self.inflight = False
        self.epoch = 0                            # bumped by seek: drops stale fetch results
        self.reset: int | None = None             # pending reset spec (EARLIEST/LATEST)
        self.committed: int | None = None
        self.high_watermark = -1
        self.gate: int | None = None              # KIP-253: deliver offsets below it only
        self.last_epoch = -1                      # leader epoch of the last delivered record
        self.reported: tuple[int, int] | None = None   # (position, last_epoch) last reported
        self.backoff_until = 0.0

    def seek(self, offset: int) -> None:
        self.position = self.fetch_offset = offset
        self.buffer.clear()
        self.epoch += 1
        self.reset = None
