"""The group coordinator's view of one internal topic's partitions on this broker (the
coordinator's PartitionWriter, Kafka's CoordinatorPartitionWriter), over the replica manager."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minibroker.broker.replica_manager import ReplicaManager


class ReplicaManagerPartitionWriter:
    def __init__(self, replica_manager: "ReplicaManager", topic: str) -> None:
        self.replica_manager = replica_manager
        self.topic = topic

    def leader_epoch(self, partition: int) -> int | None:
        p = self.replica_manager.get(self.topic, partition)
        return p.leader_epoch if p is not None and p.is_leader else None

    def append(self, partition: int, leader_epoch: int, batch: bytes,
               now_ms: int) -> asyncio.Future:
        p = self.replica_manager.get(self.topic, partition)
        res = p.log.append_as_leader(batch, leader_epoch, now_ms, origin="coordinator")
        p.maybe_increment_high_watermark()
        p.notify_data()
        return p.wait_for_high_watermark(res.last_offset + 1)

    def log_range(self, partition: int) -> tuple[int, int]:
        log = self.replica_manager.get(self.topic, partition).log
        return log.log_start_offset, log.log_end_offset

    def read(self, partition: int, offset: int, max_bytes: int,
             max_offset: int) -> list[memoryview]:
        log = self.replica_manager.get(self.topic, partition).log
        return log.read(offset, max_bytes, max_offset=max_offset).records
