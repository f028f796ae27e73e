"""The group coordinator runtime of one broker.

Groups and offsets live in __consumer_offsets; this broker coordinates the groups whose
__consumer_offsets partition it leads, loading them by replaying that partition when it becomes
leader and unloading them when it stops being leader.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minibroker.broker.broker import Broker


class GroupCoordinatorRuntime:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass

    def on_leadership_change(self) -> None:
        """Called after LeaderAndIsr / StopReplica: load or unload __consumer_offsets partitions."""
