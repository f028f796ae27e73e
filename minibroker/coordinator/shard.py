"""The groups of one __consumer_offsets partition this broker leads (one `Shard` per partition,
as Kafka's CoordinatorShard): classic groups (and every group's committed offsets) in `groups`,
KIP-848 consumer groups in `consumer_groups`."""
from __future__ import annotations

import asyncio

from minibroker.coordinator.group.classic_group import ClassicGroup
from minibroker.coordinator.group.consumer_group import ConsumerGroup
from minibroker.coordinator.offsets import OFFSETS_TOPIC


class Shard:
    """The groups of one __consumer_offsets partition this broker leads."""

    def __init__(self, partition: int, leader_epoch: int) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.loading = True
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.load_task: asyncio.Task | None = None
        # (group, topic, partition) -> tokens of offset commits appended, not yet replayed.
        self.pending_offset_commits: dict[tuple[str, str, int], set] = {}
        # Partitions deleted while loading: every replayed record predates the deletion.
        self.deleted_while_loading: set[tuple[str, int]] = set()
        # Transactional offset commits awaiting their producer's marker (coordinator/txn_offsets):
        # producer id -> {(group, topic, partition): (key, value)}; and markers that arrived
        # while loading, applied once loaded: [(producer id, commit)].
        self.pending_txn_offsets: dict[int, dict[tuple[str, str, int], tuple]] = {}
        self.markers_while_loading: list[tuple[int, bool]] = []

    def __repr__(self) -> str:
        return (f"Shard({OFFSETS_TOPIC}-{self.partition}, epoch={self.leader_epoch}, "
                f"loading={self.loading}, groups={len(self.groups)})")
