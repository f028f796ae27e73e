"""The controller's frozen metadata image (Kafka's MetadataImage, TopicsImage, ClusterImage).

Images are never mutated: a MetadataDelta collects records and `apply()` builds the next image.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from minibroker.security.acl import AclBinding
from minibroker.security.credentials import ScramCredential

EMPTY: Mapping[Any, Any] = MappingProxyType({})


CONTROL_PLANE_LISTENER = "CONTROLLER"      # control.plane.listener.name (KIP-291)


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    broker_epoch: int
    host: str
    port: int
    rack: str | None
    fenced: bool
    control_port: int = -1      # the control-plane listener (KIP-291); -1: none registered
    # Every client listener, (name, host, port, security protocol id), the inter-broker one
    # first; empty: one PLAINTEXT listener on host:port.
    listeners: tuple[tuple[str, str, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionRegistration:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # KIP-253: partition → leader epoch of lower partitions when this one was created / marked
    # for deletion (empty when not applicable).
    leader_epoch_after_creation: tuple[tuple[int, int], ...] = ()
    leader_epoch_before_deletion: tuple[tuple[int, int], ...] = ()
    # KIP-179: while a reassignment runs, replicas = target + the replicas leaving.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def marked_for_deletion(self) -> bool:
        return bool(self.leader_epoch_before_deletion)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass(frozen=True, slots=True)
class Reassignment:
    """One accepted KIP-179 request; its id is its record's metadata-log offset."""
    request_id: int
    timestamp_ms: int
    # (topic id, partition) → (target replicas, replicas when accepted)
    partitions: Mapping[tuple[uuid.UUID, int], tuple[tuple[int, ...], tuple[int, ...]]]
    done: frozenset[tuple[uuid.UUID, int]] = frozenset()    # (topic id, partition) whose move completed
    gone: frozenset[tuple[uuid.UUID, int]] = frozenset()    # ... deleted before it completed
    cancelled: frozenset[tuple[uuid.UUID, int]] = frozenset()   # ... moved back (KIP-455 cancel)

    @property
    def complete(self) -> bool:
        return len(self.done) + len(self.gone) + len(self.cancelled) == len(self.partitions)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRegistration]
    initial_partition_count: int
    undeleted_partition_count: int
    configs: Mapping[str, str] = field(default_factory=lambda: EMPTY)
    # KIP-253: an expansion whose new partitions are not all created yet carries the
    # pre-bump epochs they get as leaderEpochAfterCreation.
    pending_after_creation: tuple[tuple[int, int], ...] = ()
    # KIP-253: the last leader epoch of each removed partition index. An index created again
    # starts above it, so a fetch or committed offset of the old incarnation is fenced and its
    # OffsetForLeaderEpoch shows the truncation, instead of reading the new log from a stale offset.
    removed_leader_epochs: tuple[tuple[int, int], ...] = ()

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1                  # last metadata-log offset applied
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: EMPTY)
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: EMPTY)
    topics_by_id: Mapping[uuid.UUID, str] = field(default_factory=lambda: EMPTY)
    # Dynamic broker configs: broker id (or "" for the cluster default) -> {name: value}.
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: EMPTY)
    # Group configs (KIP-848, resource type GROUP): group id -> {name: value}.
    group_configs: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: EMPTY)
    # SCRAM credentials (UserScramCredentialRecord): (user, mechanism id) -> credential.
    scram_credentials: Mapping[tuple[str, int], ScramCredential] = field(
        default_factory=lambda: EMPTY)
    next_producer_id: int = 0
    # KIP-179: reassignment requests by id (see controller/reassignment.py), and the request
    # each partition being moved belongs to.
    reassignments: Mapping[int, Reassignment] = field(default_factory=lambda: EMPTY)
    moving: Mapping[tuple[uuid.UUID, int], int] = field(default_factory=lambda: EMPTY)
    # KIP-253: the largest partition epoch of any partition (-1: none), kept by MetadataDelta.apply
    # so that each UpdateMetadata does not scan every partition.
    max_partition_epoch: int = -1
    # KIP-11: every ACL by its id (AccessControlEntryRecord), brokers get them all.
    acls: Mapping[uuid.UUID, AclBinding] = field(default_factory=lambda: EMPTY)

    def live_brokers(self) -> list[BrokerRegistration]:
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        name = self.topics_by_id.get(topic_id)
        return None if name is None else self.topics[name]

    def compute_max_partition_epoch(self) -> int:
        return max((p.partition_epoch for t in self.topics.values()
                    for p in t.partitions.values()), default=-1)
