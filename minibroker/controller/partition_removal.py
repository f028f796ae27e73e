"""KIP-253: the controller task that removes drained partitions marked for deletion.

A marked partition is drained once its log start offset reached its log end offset (retention or
DeleteRecords emptied it); the controller then writes RemovePartitionRecord, and the propagator
sends its replicas StopReplica(delete=true). The decisions are partition_count's pure functions;
this module only polls the brokers and writes through the controller.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Protocol, TypeVar

from minibroker.controller.image import MetadataImage
from minibroker.controller.partition_count import marked_partitions, remove_partition
from minibroker.controller.result import Result

log = logging.getLogger("minibroker.controller")


T = TypeVar("T")


class RemovalHost(Protocol):
    """What the removal task uses of the controller."""
    running: bool
    image: MetadataImage

    async def log_bounds(self, broker_id: int, topic: str,
                         partition: int) -> tuple[int | None, int | None]: ...

    async def write(self, op: Callable[[MetadataImage], Result[T]]) -> T: ...


async def removal_loop(ctl: RemovalHost, interval_ms: int) -> None:
    while ctl.running:
        await asyncio.sleep(interval_ms / 1000)
        try:
            await remove_drained_partitions(ctl)
        except Exception:  # noqa: BLE001 — a broker may be down; try again next round
            log.exception("controller: checking partitions marked for deletion failed")


async def remove_drained_partitions(ctl: RemovalHost) -> list[tuple[str, int]]:
    """One round: remove every marked partition whose log start offset reached its end."""
    removed = []
    for name, pid, leader in marked_partitions(ctl.image):
        start, end = await ctl.log_bounds(leader, name, pid)
        if start is not None and start == end:
            if await ctl.write(lambda image: remove_partition(image, name, pid)):
                removed.append((name, pid))
                log.info("controller: removed drained partition %s-%d", name, pid)
    return removed
