"""The group coordinator's PartitionWriter (Kafka's CoordinatorPartitionWriter): one internal
topic's partitions on this broker, through the replica manager."""
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
               now_ms: int) -> asyncio.Future[int]:
        return self.replica_manager.append_coordinator_batch(self.topic, partition, leader_epoch,
                                                             batch, now_ms)

    def log_range(self, partition: int) -> tuple[int, int]:
        return self.replica_manager.log_range(self.topic, partition)

    def read(self, partition: int, offset: int, max_bytes: int,
             max_offset: int) -> list[memoryview]:
        return self.replica_manager.read_batches(self.topic, partition, offset, max_bytes,
                                                 max_offset)
