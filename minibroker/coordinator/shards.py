"""What the group coordinator runtime and the transaction coordinator share (as Kafka's
CoordinatorRuntime serves both): an internal compacted topic, created through the controller on
the first FindCoordinator; one shard per partition of it this broker leads, loaded by replaying
the partition when the broker becomes its leader and dropped when it stops being leader.
Requests for a loading shard get COORDINATOR_LOAD_IN_PROGRESS, for a partition this broker does
not lead NOT_COORDINATOR.

A coordinator subclasses `ShardedCoordinator` and says what its shards are (`_new_shard`), how a
stored batch is applied (`_replay_batch`), what follows a load or an unload, and how its topic is
created (`_topic_spec`).
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Awaitable, Callable, Generic, Protocol, TypeVar

import kafka.errors as Errors

from minibroker.coordinator.offsets import partition_for
from minibroker.log.batch import next_offset

if TYPE_CHECKING:
    from minibroker.metadata.cache import MetadataCache
    from minibroker.clock import Clock
    from minibroker.config import ClusterConfig
    from minibroker.coordinator.partition_writer import PartitionWriter

# CreateTopics as the controller takes it: [(name, partitions, rf, assignment, configs)] ->
# results with error_code and message.
CreateTopics = Callable[[list[tuple]], Awaitable[list]]

_LOAD_READ_BYTES = 1 << 20


class LoadableShard(Protocol):
    partition: int
    leader_epoch: int
    loading: bool
    load_task: asyncio.Task | None


S = TypeVar("S", bound=LoadableShard)


class ShardedCoordinator(Generic[S]):
    topic: str                  # the internal topic: __consumer_offsets, __transaction_state
    log = logging.getLogger("minibroker.coordinator")

    def __init__(self, node_id: int, config: "ClusterConfig", clock: "Clock",
                 metadata: "MetadataCache", writer: "PartitionWriter",
                 create_topics: CreateTopics) -> None:
        self.node_id = node_id
        self.config = config
        self.clock = clock
        self.metadata = metadata
        self.writer = writer
        self._create_topics = create_topics
        self.shards: dict[int, S] = {}
        self.running = False
        self._tasks: set[asyncio.Task] = set()
        self._creating = False

    # ------------------------------------------------------------------ what a coordinator says
    def _default_partitions(self) -> int:
        """The configured partition count of the topic (before it exists)."""
        raise NotImplementedError

    def _topic_spec(self, live_brokers: int) -> tuple[int, dict[str, str]]:
        """(replication factor, topic configs) to create the topic with."""
        raise NotImplementedError

    def _new_shard(self, partition: int, leader_epoch: int) -> S:
        raise NotImplementedError

    def _replay_batch(self, shard: S, data: bytes) -> None:
        """Apply one stored record batch of the shard's partition."""
        raise NotImplementedError

    def _on_loaded(self, shard: S) -> None:
        """The shard replayed its partition and now serves requests."""

    def _on_unloaded(self, shard: S) -> None:
        """The shard's partition is led elsewhere now."""

    # ------------------------------------------------------------------ lifecycle
    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        self.running = False
        for pid in sorted(self.shards):
            self._unload(pid)
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def on_leadership_change(self) -> None:
        """Called after LeaderAndIsr / StopReplica: load or unload the topic's partitions."""
        if not self.running:
            return
        for pid in sorted(self.shards):
            if self.writer.leader_epoch(pid) != self.shards[pid].leader_epoch:
                self._unload(pid)
        # Only this topic's partitions (not a scan of every partition per LeaderAndIsr); the
        # LeaderAndIsr may come before the UpdateMetadata that shows the topic: probe the count.
        for pid in range(max(self.num_partitions(), self._default_partitions())):
            epoch = self.writer.leader_epoch(pid)
            if epoch is not None and pid not in self.shards:
                shard = self.shards[pid] = self._new_shard(pid, epoch)
                shard.load_task = self._spawn(self._load(shard))

    async def _load(self, shard: S) -> None:
        try:
            offset, end = self.writer.log_range(shard.partition)
            while offset < end:
                batches = self.writer.read(shard.partition, offset, _LOAD_READ_BYTES, end)
                if not batches:
                    break
                for view in batches:
                    offset = next_offset(view)
                    self._replay_batch(shard, bytes(view))
                await asyncio.sleep(0)          # let other requests in; they see LOAD_IN_PROGRESS
                if self.shards.get(shard.partition) is not shard:
                    return
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 — a shard that cannot load stays unavailable
            self.log.exception("broker %d: loading %s-%d failed", self.node_id, self.topic,
                          shard.partition)
            return
        shard.loading = False
        self._on_loaded(shard)

    def _unload(self, pid: int) -> None:
        shard = self.shards.pop(pid, None)
        if shard is None:
            return
        if shard.load_task is not None and not shard.load_task.done():
            shard.load_task.cancel()
        self._on_unloaded(shard)

    # ------------------------------------------------------------------ routing
    def num_partitions(self) -> int:
        t = self.metadata.topics.get(self.topic)
        return len(t.partitions) if t is not None and t.partitions else \
            self._default_partitions()

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions())

    def shard_for(self, key: str) -> tuple[S | None, int]:
        shard = self.shards.get(self.partition_for(key))
        if shard is None or not self.running:
            return None, Errors.NotCoordinatorError.errno
        if shard.loading:
            return None, Errors.CoordinatorLoadInProgressError.errno
        return shard, 0

    def is_active(self, shard: S) -> bool:
        return self.shards.get(shard.partition) is shard and not shard.loading

    # ------------------------------------------------------------------ FindCoordinator
    def coordinator_for(self, key: str) -> tuple[int, int]:
        """(error, leader node id) of the key's partition; creates the topic through the
        controller on first use."""
        topic = self.metadata.topics.get(self.topic)
        if topic is None:
            self._create_topic()
            return Errors.CoordinatorNotAvailableError.errno, -1
        p = topic.partitions.get(partition_for(key, len(topic.partitions)))
        if p is None or p.leader < 0 or p.leader not in self.metadata.brokers:
            return Errors.CoordinatorNotAvailableError.errno, -1
        return 0, p.leader

    def _create_topic(self) -> None:
        if self._creating:
            return
        self._creating = True
        rf, configs = self._topic_spec(len(self.metadata.alive_brokers()) or 1)
        spec = (self.topic, self._default_partitions(), rf, None, configs)

        async def create() -> None:
            try:
                [res] = await self._create_topics([spec])
                if res.error_code and res.error_code != Errors.TopicAlreadyExistsError.errno:
                    self.log.warning("broker %d: creating %s failed: %s %s", self.node_id,
                                self.topic, res.error_code, res.message)
            except Exception:  # noqa: BLE001 — the next FindCoordinator retries
                self.log.exception("broker %d: creating %s failed", self.node_id, self.topic)
            finally:
                self._creating = False
        self._spawn(create())
