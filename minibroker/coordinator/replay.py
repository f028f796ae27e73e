"""`replay`: the one function that applies a coordinator record to a shard's groups, for both
group protocols, live (as the coordinators write records) and when a broker loads a partition
after a coordinator move.

Classic groups and committed offsets: minibroker.coordinator.group.classic_group_records;
KIP-848 consumer groups (record types 3-8): minibroker.coordinator.group.consumer_group_records.
"""
from __future__ import annotations

from minibroker.coordinator.group import classic_group_records, consumer_group_records
from minibroker.coordinator.shard import Shard


def replay_all(shard: Shard, records: list[tuple[bytes, bytes | None]]) -> list:
    """Replay records a coordinator is about to append; returns them."""
    for key, value in records:
        replay(shard, key, value)
    return records


def replay(shard: Shard, key: bytes, value: bytes | None) -> None:
    """Apply one record (value None: a tombstone); ValueError when it does not decode."""
    if consumer_group_records.is_consumer_group_record(key):
        consumer_group_records.replay(shard.consumer_groups, key, value)
    else:
        classic_group_records.replay(shard.groups, key, value)
