"""The broker's view of cluster metadata, replaced wholesale or in part by UpdateMetadata.

Brokers know only what the controller told them; this cache can lag the controller like a
real broker's. Encoded per-topic Metadata parts are cached and dropped when a topic changes.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str               # the inter-broker listener's address (replication, markers)
    port: int
    rack: str | None
    listeners: tuple[tuple[str, str, int], ...] = ()    # (name, host, port) of each listener

    def address(self, listener: str) -> tuple[str, int]:
        """Where a client connected on `listener` reaches this broker (Kafka answers Metadata
        with the endpoints of the listener the request came on)."""
        for name, host, port in self.listeners:
            if name == listener:
                return host, port
        return self.host, self.port


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    leader_epoch_after_creation: tuple[tuple[int, int], ...] = ()
    leader_epoch_before_deletion: tuple[tuple[int, int], ...] = ()


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    partitions: dict[int, PartitionInfo]
    initial_partition_count: int
    undeleted_partition_count: int
    configs: dict[str, str] = field(default_factory=dict)


class MetadataCache:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.topics_by_id: dict[uuid.UUID, TopicInfo] = {}
        self.controller_id = -1
        self.controller_epoch = -1
        self.cluster_id: str | None = None
        self.max_partition_epoch = -1
        self.metadata_offset = -1       # the controller's image offset (ApiVersions' features epoch)
        # topic → {Metadata version: its encoded topic entry}; dropped when the topic changes.
        self.encoded: dict[str, dict[int | tuple[int, frozenset[int]], bytes]] = {}
        # Bumped on every broker/topic change; whole encoded Metadata responses are kept per generation.
        self.generation = 0
        self.responses: dict[tuple[object, ...], bytes] = {}
        # Called after a change: topic_listeners(name, old TopicInfo | None, new TopicInfo | None)
        # on every put/remove, broker_listeners(brokers) on every broker list (the group
        # coordinator's KIP-1101 topic hash cache, and its offsets of deleted partitions: a put
        # is the whole topic, so a partition the old TopicInfo had and the new one lacks is gone).
        self.topic_listeners: list[Callable[[str, TopicInfo | None, TopicInfo | None], None]] = []
        self.broker_listeners: list[Callable[[list[BrokerInfo]], None]] = []

    def update_brokers(self, brokers: list[BrokerInfo]) -> None:
        self.brokers = {b.node_id: b for b in sorted(brokers, key=lambda b: b.node_id)}
        self._changed()
        for listener in self.broker_listeners:
            listener(list(self.brokers.values()))

    def put_topic(self, topic: TopicInfo) -> None:
        old = self.topics.get(topic.name)
        if old is not None and old.topic_id != topic.topic_id:
            self.topics_by_id.pop(old.topic_id, None)
        self.topics[topic.name] = topic
        self.topics_by_id[topic.topic_id] = topic
        self._drop_encoded(topic.name)
        for listener in self.topic_listeners:
            listener(topic.name, old, topic)

    def remove_topic(self, name: str) -> None:
        t = self.topics.pop(name, None)
        if t is not None:
            self.topics_by_id.pop(t.topic_id, None)
        self._drop_encoded(name)
        if t is not None:
            for listener in self.topic_listeners:
                listener(name, t, None)

    def _changed(self) -> None:
        self.generation += 1
        self.responses.clear()

    def _drop_encoded(self, name: str) -> None:
        self._changed()
        self.encoded.pop(name, None)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def alive_brokers(self) -> list[BrokerInfo]:
        return list(self.brokers.values())
