"""KIP-878's StaticStreamPartitioner, and the KIP-253 linear hashing partitioner shipped as one.

A static partitioner sends a key to the same partition whatever the partition count, so internal
topics can grow with their inputs without moving state: `static_partition(topic, key, n)`.
`on_partition_expansion(old, new)` is an optional callback, run once by the group leader's
instance when the whole topology has stabilised on the new count.

Linear hashing (minibroker.partitioning) keeps every key in its partition except the keys of the
one partition each added partition splits off (they move to the new child). That is static for
every key the KIP allows to be sent before the expansion has finished (the seed: "avoid sending
records with keys that are to go into the new partitions until after Streams has processed the
expansion"); with KIP-253 ordered delivery the moved keys also stay in order across the split.
"""
from __future__ import annotations

from typing import Callable, Protocol, runtime_checkable

from minibroker.partitioning import partition_for_key

__all__ = ["StaticStreamPartitioner", "LinearHashingPartitioner"]


@runtime_checkable
class StaticStreamPartitioner(Protocol):
    def static_partition(self, topic: str, key: bytes, num_partitions: int) -> int:
        """A partition in [0, num_partitions) that depends on the key only, never on the value,
        and stays the key's partition when num_partitions grows."""
        ...


class LinearHashingPartitioner:
    """KIP-253 linear hashing over N = the topic's initial partition count (the runner binds the
    lookup to its metadata; unknown topics count from 1, which agrees with any power-of-two N)."""

    def __init__(self, initial_count_of: Callable[[str], int | None] | None = None,
                 on_expansion: Callable[[int, int], None] | None = None) -> None:
        self.initial_count_of = initial_count_of
        self._on_expansion = on_expansion

    def static_partition(self, topic: str, key: bytes, num_partitions: int) -> int:
        n = self.initial_count_of(topic) if self.initial_count_of is not None else None
        if not n or n > num_partitions:
            n = 1
        return partition_for_key(key, n, num_partitions)

    def on_partition_expansion(self, old_num_partitions: int, new_num_partitions: int) -> None:
        if self._on_expansion is not None:
            self._on_expansion(old_num_partitions, new_num_partitions)
