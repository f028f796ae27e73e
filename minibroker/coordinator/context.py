"""What the group coordinators (classic, KIP-848, offsets, positions) use of the runtime they run
on (minibroker.coordinator.runtime.GroupCoordinatorRuntime implements it): a reader follows these
few calls instead of the whole runtime, and no coordinator module imports the runtime."""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable, Protocol

from minibroker.coordinator.errors import INVALID_GROUP_ID
from minibroker.coordinator.group.classic_group import ClassicGroup
from minibroker.coordinator.shard import Shard

if TYPE_CHECKING:
    from minibroker.metadata.cache import MetadataCache
    from minibroker.clock import Clock
    from minibroker.config import ClusterConfig
    from minibroker.ids import IdSource

Record = tuple[bytes, "bytes | None"]


def completed(value) -> asyncio.Future:
    """A future already holding `value` (an answer that needs no write)."""
    fut = asyncio.get_running_loop().create_future()
    fut.set_result(value)
    return fut


def group_shard(rt: "CoordinatorContext", group_id: str) -> tuple[Shard | None, int]:
    """The loaded shard of a group's partition, else (None, error): INVALID_GROUP_ID for an empty
    id, then rt.shard_for's (Kafka's GroupCoordinator.validateGroupStatus)."""
    if not group_id:
        return None, INVALID_GROUP_ID
    return rt.shard_for(group_id)


class CoordinatorPart:
    """A coordinator (classic, KIP-848, offsets) on its runtime: the config and the clock."""

    def __init__(self, rt: "CoordinatorContext") -> None:
        self.rt = rt
        self.config = rt.config

    @property
    def now_ms(self) -> int:
        return self.rt.clock.now_ms()


class ClassicGroupHooks(Protocol):
    """The classic coordinator's part in committing offsets."""

    def validate_offset_commit(self, shard: Shard, group_id: str, generation_id: int,
                               member_id: str, group_instance_id: str | None
                               ) -> tuple[ClassicGroup | None, int]: ...

    def maybe_forget(self, shard: Shard, group: ClassicGroup) -> None: ...


class ConsumerGroupHooks(Protocol):
    """The KIP-848 coordinator's part in committing offsets and deleting groups."""

    def validate_offset_commit(self, shard: Shard, group_id: str, member_id: str,
                               member_epoch: int) -> int | None: ...

    def validate_delete_group(self, shard: Shard, group_id: str) -> int | None: ...

    def delete_group(self, shard: Shard, group_id: str) -> list[Record]: ...


class CoordinatorContext(Protocol):
    config: "ClusterConfig"
    clock: "Clock"
    ids: "IdSource"
    metadata: "MetadataCache"
    classic: ClassicGroupHooks
    consumer: ConsumerGroupHooks

    @property
    def max_record_bytes(self) -> int:
        """What one coordinator record batch may take (max.message.bytes of the topic)."""

    def shard_for(self, group_id: str) -> tuple[Shard | None, int]:
        """The loaded shard of the group's partition, else (None, NOT_COORDINATOR or
        COORDINATOR_LOAD_IN_PROGRESS)."""

    def is_active(self, shard: Shard) -> bool:
        """Still loaded and led (a timer or write callback of an unloaded shard does nothing)."""

    def shards_in_order(self) -> list[Shard]: ...

    def append(self, shard: Shard, records: list[Record],
               on_commit: Callable[[int], None] | None) -> asyncio.Future:
        """Write records as one batch; a future of 0 once committed, else of an error code."""

    def call_later(self, delay_ms: int, fn: Callable, *args) -> asyncio.TimerHandle:
        """A timer on the event loop's clock (virtual in tests)."""
