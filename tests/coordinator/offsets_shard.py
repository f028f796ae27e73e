"""A single test broker's __consumer_offsets shard 0: made led by it, and waited on until loaded
(shared by the classic and consumer group coordinator tests)."""
from __future__ import annotations

import asyncio
import uuid

from minibroker.broker.broker import Broker
from minibroker.coordinator.offsets import OFFSETS_TOPIC


def lead(b: Broker, epoch: int) -> None:
    b.replica_manager.apply_partition_state(OFFSETS_TOPIC, uuid.UUID(int=2), 0, 1, epoch, epoch,
                                            [1], [1], 1, {})
    b.groups.on_leadership_change()


async def loaded(b: Broker) -> None:
    for _ in range(100):
        shard = b.groups.shards.get(0)
        if shard is not None and not shard.loading:
            return
        await asyncio.sleep(0)
    raise AssertionError("shard did not load")


async def started(b: Broker) -> Broker:
    """`b` running, its group coordinator started and its shard 0 led (epoch 0) and loaded."""
    b.running = True
    b.groups.start()
    lead(b, epoch=0)
    await loaded(b)
    return b
