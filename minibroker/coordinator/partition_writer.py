"""What the group coordinator needs of the __consumer_offsets partitions it coordinates (Kafka's
PartitionWriter and CoordinatorLoader, in one interface): whether this broker leads a partition
and under which leader epoch, appending a batch as leader, and reading the log back on load.

The broker implements it over its replica manager (minibroker.broker.coordinator_log); the
coordinator never sees a Partition or a PartitionLog.
"""
from __future__ import annotations

import asyncio
from typing import Protocol


class PartitionWriter(Protocol):
    def leader_epoch(self, partition: int) -> int | None:
        """The leader epoch when this broker leads `partition`, else None."""

    def append(self, partition: int, leader_epoch: int, batch: bytes,
               now_ms: int) -> asyncio.Future:
        """Append one record batch as leader under `leader_epoch`; a future of 0 once the high
        watermark passed it, else of an error code (cancelled: leadership lost). Raises
        kafka.errors.KafkaError when the log refuses the batch."""

    def log_range(self, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset) of `partition`."""

    def read(self, partition: int, offset: int, max_bytes: int,
             max_offset: int) -> list[memoryview]:
        """Whole stored batches from `offset`, each below `max_offset`, up to `max_bytes`."""
