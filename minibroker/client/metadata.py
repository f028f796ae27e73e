"""Cluster metadata as the client sees it: brokers, and per topic its partitions and leaders.

Topic entries are frozen snapshots replaced on every refresh.  `request_update(topic)` never blocks:
it marks the topic stale and one background refresh (coalescing every topic asked for meanwhile)
fetches them, so a leader change on one partition does not stall the others.
KIP-253: `TopicMetadata` carries `initial_partition_count` and `undeleted_partition_count` from
MetadataResponseKip253's tagged fields (-1 from brokers that do not send them).
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Callable

from kafka.errors import for_code
from kafka.protocol.metadata import MetadataRequest

from minibroker.client.connection_pool import ConnectionPool
from minibroker.protocol.messages import MetadataResponseKip253

log = logging.getLogger("minibroker.client")


@dataclass(frozen=True)
class PartitionMetadata:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int = 0


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    error_code: int = 0
    topic_id: object = None
    is_internal: bool = False
    initial_partition_count: int = -1
    undeleted_partition_count: int = -1

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def producer_partition_count(self) -> int:
        """Partitions new records may go to: KIP-253's undeleted count when the broker reports it."""
        u = self.undeleted_partition_count
        return u if 0 < u <= len(self.partitions) else len(self.partitions)

    def leader(self, partition: int) -> int:
        p = self.partitions.get(partition)
        return p.leader if p is not None else -1


@dataclass(frozen=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class ClusterMetadata:
    def __init__(self, pool: ConnectionPool, refresh_backoff_ms: int = 50,
                 allow_auto_topic_creation: bool = True) -> None:
        self.pool = pool
        self.refresh_backoff = refresh_backoff_ms / 1000
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.topics: dict[str, TopicMetadata] = {}
        self.brokers: dict[int, BrokerMetadata] = {}
        self.controller_id = -1
        self.cluster_id: str | None = None
        self._wanted: set[str] = set()           # topics the client uses (refreshed together)
        self._stale: set[str] = set()
        self._task: asyncio.Task | None = None
        self._done: asyncio.Event | None = None  # set when the running refresh ends
        self._listeners: list[Callable[[], None]] = []
        self.closed = False

    def on_update(self, fn: Callable[[], None]) -> None:
        self._listeners.append(fn)

    # ------------------------------------------------------------------ reading
    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def leader(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        return t.leader(partition) if t is not None else -1

    def leader_epoch(self, topic: str, partition: int) -> int:
        t = self.topics.get(topic)
        p = t.partitions.get(partition) if t is not None else None
        return p.leader_epoch if p is not None else -1

    # ------------------------------------------------------------------ refreshing
    def add_topics(self, topics) -> None:
        new = set(topics) - self._wanted
        if new:
            self._wanted |= new
            self._stale |= new

    def request_update(self, topic: str | None = None) -> None:
        """Mark `topic` (or every wanted topic) stale; a background refresh follows. Never blocks."""
        if topic is not None:
            self._wanted.add(topic)
            self._stale.add(topic)
        else:
            self._stale |= self._wanted
        if self._task is None and not self.closed:
            self._done = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._refresh_loop())

    async def refresh(self, topics=None, timeout: float | None = None) -> None:
        """Refresh now (coalesced with a running refresh) and wait for it."""
        if topics:
            for t in topics:
                self.request_update(t)
        else:
            self.request_update()
        done = self._done
        if done is not None:
            await asyncio.wait_for(done.wait(), timeout or self.pool.request_timeout * 2)

    async def wait_for_topic(self, topic: str, timeout: float = 30.0,
                             need_leaders: bool = True) -> TopicMetadata:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            t = self.topics.get(topic)
            if t is not None and t.error_code == 0 and t.partitions and (
                    not need_leaders or all(p.leader >= 0 for p in t.partitions.values())):
                return t
            if loop.time() > end:
                if t is not None and t.error_code:
                    raise for_code(t.error_code)(f"metadata for {topic}")
                raise asyncio.TimeoutError(f"no metadata for topic {topic}")
            try:
                await self.refresh([topic], timeout=max(0.01, end - loop.time()))
            except asyncio.TimeoutError:
                pass
            t = self.topics.get(topic)
            if t is None or t.error_code or any(p.leader < 0 for p in t.partitions.values()):
                await asyncio.sleep(self.refresh_backoff)

    async def _refresh_loop(self) -> None:
        try:
            first = True
            while self._stale and not self.closed:
                if not first:                    # asked again meanwhile: not more often than this
                    await asyncio.sleep(self.refresh_backoff)
                first = False
                names = sorted(self._stale)
                self._stale.clear()
                try:
                    await self._fetch(names)
                except Exception as e:  # noqa: BLE001 - any failure: back off and retry
                    log.debug("metadata refresh of %s failed: %r", names, e)
                    self._stale |= set(names)
                    await asyncio.sleep(self.refresh_backoff)
        finally:
            self._task = None
            done, self._done = self._done, None
            if done is not None:
                done.set()

    async def fetch_all(self) -> MetadataResponseKip253:
        """Metadata for every topic (admin use); also updates brokers."""
        return await self._fetch(None)

    async def _fetch(self, names: list[str] | None) -> MetadataResponseKip253:
        prefer = [self.controller_id] if self.controller_id >= 0 else None
        node, conn = await self.pool.any_connection(prefer)
        version = self.pool.version(conn, MetadataRequest, hi=12)
        topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n)
                                             for n in names]
        req = MetadataRequest(topics=topics,
                              allow_auto_topic_creation=self.allow_auto_topic_creation,
                              include_cluster_authorized_operations=False,
                              include_topic_authorized_operations=False)
        try:
            resp = await conn.request(req, version, timeout=self.pool.request_timeout,
                                      response_class=MetadataResponseKip253)
        except Exception:
            self.pool.close_node(node, "metadata request failed")
            raise
        self._apply(resp)
        return resp

    def _apply(self, resp) -> None:
        self.brokers = {b.node_id: BrokerMetadata(b.node_id, b.host, b.port, b.rack)
                        for b in resp.brokers}
        self.pool.update_addresses({b.node_id: (b.host, b.port) for b in resp.brokers})
        self.controller_id = getattr(resp, "controller_id", -1)
        self.cluster_id = getattr(resp, "cluster_id", None)
        not_ready = []
        for t in resp.topics:
            parts = {p.partition_index: PartitionMetadata(
                p.partition_index, p.leader_id, getattr(p, "leader_epoch", -1),
                tuple(p.replica_nodes), tuple(p.isr_nodes), p.error_code) for p in t.partitions}
            self.topics[t.name] = TopicMetadata(
                t.name, parts, t.error_code, getattr(t, "topic_id", None),
                getattr(t, "is_internal", False),
                getattr(t, "initial_partition_count", -1),
                getattr(t, "undeleted_partition_count", -1))
            if t.error_code or any(p.leader < 0 for p in parts.values()):
                # Not ready yet (being created, leader election): look again soon.
                not_ready.append(t.name)
        if not_ready and not self.closed:
            asyncio.get_running_loop().call_later(self.refresh_backoff, self._retry_stale, not_ready)
        for fn in self._listeners:
            fn()

    def _retry_stale(self, names: list[str]) -> None:
        if not self.closed:
            for n in names:
                if n in self._wanted:
                    self.request_update(n)

    def close(self) -> None:
        self.closed = True
        if self._task is not None:
            self._task.cancel()
