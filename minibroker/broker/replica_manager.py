"""The partitions a broker hosts, as leader or follower, and the background work around them.

Owns: partition state changes from LeaderAndIsr / StopReplica, the leader's append path
(`append_records`: Produce, broker/append_path.py), the reads of the log (`fetch_records`: Fetch,
broker/fetch_path.py; `list_offset`: ListOffsets, `end_offset_for_epoch`: OffsetForLeaderEpoch,
broker/partition_reads.py), the replica fetchers of follower partitions, ISR changes
(broker/isr.py), and log retention and cleaning (broker/log_maintenance.py). Handlers call in
here and only translate requests and answers; nobody else reaches into PartitionLog. The produce
and fetch paths build their wire-ready per-partition results (protocol.produce_response /
protocol.fast) directly: one method call per request, no per-batch translation layer.

A ReplicaManager is given what it uses (node id, config, clock, the metadata cache, the
controller's AlterPartition, the broker's log.* defaults), not the Broker.
"""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Sequence

from kafka.errors import NotLeaderForPartitionError, StaleControllerEpochError

from minibroker.broker.append_path import AppendPath
from minibroker.broker.fetch_path import FetchPath
from minibroker.broker.fetcher import ReplicaFetcher
from minibroker.broker.first_fetch import FirstFetches
from minibroker.broker.isr import IsrManager
from minibroker.broker.log_maintenance import LogMaintenance
from minibroker.broker.partition import Partition
from minibroker.broker.partition_reads import PartitionReads
from minibroker.broker.replica_state import AlterPartitionSender
from minibroker.broker.stats import BrokerStats
from minibroker.broker.throttle import ReplicationThrottle
from minibroker.clock import Clock
from minibroker.config import ClusterConfig
from minibroker.log.config import LogConfig
from minibroker.log.log_manager import LogManager
from minibroker.log.memory import LogMemory
from minibroker.log.partition_log import PartitionLog
from minibroker.metadata.cache import MetadataCache
from minibroker.network.partitions import NetworkPartitions


class ReplicaManager(AppendPath, FetchPath, PartitionReads, IsrManager, LogMaintenance):
    def __init__(self, node_id: int, config: ClusterConfig, clock: Clock,
                 metadata: MetadataCache, controller: AlterPartitionSender,
                 log_defaults: LogConfig,
                 log_factory: Callable[[str, int, LogConfig, uuid.UUID], PartitionLog] | None = None,
                 stats: BrokerStats | None = None,
                 throttle: ReplicationThrottle | None = None,
                 network: NetworkPartitions | None = None,
                 data_dir: str | None = None) -> None:
        """log_factory(topic, partition, config, topic id): a hosted partition's new log; by
        default an in-memory PartitionLog counted in (and capped by) this broker's log memory,
        or, given `data_dir`, one on disk there (log/log_manager.py). network: the inter-broker
        links replica fetchers connect through (network partitions)."""
        self.node_id = node_id
        # Counters the metrics exporter reads (bytes in/out, ISR changes): plain integers.
        self.stats = stats if stats is not None else BrokerStats()
        # Replication quotas of partition moves (leader side here, follower side in fetchers).
        self.throttle = throttle if throttle is not None else ReplicationThrottle(
            node_id, clock.monotonic)
        self.config = config
        self.clock = clock
        self.network = network      # inter-broker links (replica fetchers connect through it)
        self.metadata = metadata
        self.controller = controller
        # Topic configs not set on a topic default to the broker's log.* configs (Kafka's synonyms).
        self.log_defaults = log_defaults
        self.running = False
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.controller_epoch = -1
        self.topic_undeleted_counts: dict[str, int] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._tasks: list[asyncio.Task[None]] = []
        # AlterPartition calls in flight: one may wait for a controller that never comes back,
        # so stop() cancels them rather than leaving them to a closing loop.
        self._isr_tasks: set[asyncio.Task[None]] = set()
        # Bytes held by this broker's logs, capped by log.memory.max.bytes (minibroker.log.memory).
        self.log_memory = LogMemory(config.log_memory_max_bytes, config.log_memory_overflow)
        # Followers yet to fetch a partition we newly lead, and their waiting fetches.
        self.first_fetches = FirstFetches(clock.monotonic)
        self.log_manager = None if data_dir is None else LogManager(data_dir, clock, self.log_memory)
        self.new_log = log_factory or (self._memory_log if self.log_manager is None
                                       else self.log_manager.open_log)

    def _memory_log(self, topic: str, partition: int, config: LogConfig,
                    topic_id: uuid.UUID) -> PartitionLog:
        return PartitionLog(topic, partition, config, self.clock, memory=self.log_memory)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.running = True
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._isr_shrink_loop()),
                       loop.create_task(self._retention_loop())]
        if self.config.log_cleaner_enable:
            self._tasks.append(loop.create_task(self._cleaner_loop()))
        if self.log_manager is not None:
            self._tasks.append(loop.create_task(self._checkpoint_loop()))

    async def stop(self) -> None:
        self.running = False
        for t in self._tasks:
            t.cancel()
        for f in list(self.fetchers.values()):
            await f.stop()
        self.fetchers.clear()
        for p in self.partitions.values():
            p.fail_waiters(NotLeaderForPartitionError.errno)
            p.notify_data()
        for t in self._isr_tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, *self._isr_tasks, return_exceptions=True)
        self._tasks = []
        if self.log_manager is not None:
            self.log_manager.close()
        self.log_memory.close()         # its spill directory (log/spill.py)

    # ------------------------------------------------------------------ LeaderAndIsr
    def check_controller_epoch(self, controller_epoch: int) -> int:
        if controller_epoch < self.controller_epoch:
            return int(StaleControllerEpochError.errno)
        self.controller_epoch = controller_epoch
        return 0

    def apply_partition_state(self, topic: str, topic_id: uuid.UUID, partition: int, leader: int,
                              leader_epoch: int, partition_epoch: int, isr: Sequence[int],
                              replicas: Sequence[int], undeleted_partition_count: int,
                              configs: dict[str, str],
                              after_creation: Iterable[tuple[int, int]] = (),
                              before_deletion: Iterable[tuple[int, int]] = ()) -> int:
        key = (topic, partition)
        p = self.partitions.get(key)
        if p is not None and p.topic_id != topic_id:
            self._remove(key)           # a deleted and re-created topic of the same name
            p = None
        if p is None:
            config = LogConfig.from_configs(configs, defaults=self.log_defaults)
            p = Partition(self.node_id, topic, topic_id, partition,
                          self.new_log(topic, partition, config, topic_id), self.clock,
                          self.request_isr_change)
            p.high_watermark = p.log.recovered_high_watermark
            self.partitions[key] = p
        elif (leader_epoch, partition_epoch) < (p.leader_epoch, p.partition_epoch):
            return int(StaleControllerEpochError.errno)
        if configs:
            p.log.config = LogConfig.from_configs(configs, defaults=self.log_defaults)
        self.topic_undeleted_counts[topic] = undeleted_partition_count
        p.undeleted_partition_count = undeleted_partition_count
        p.leader_epoch_after_creation = tuple(after_creation)
        p.leader_epoch_before_deletion = tuple(before_deletion)
        if leader == self.node_id:
            self._remove_from_fetcher(p)
            p.make_leader(leader_epoch, partition_epoch, isr, replicas)
            self.first_fetches.led(p)
        else:
            p.make_follower(leader, leader_epoch, partition_epoch, isr, replicas)
            self._remove_from_fetcher(p)
            if leader >= 0 and self.node_id in p.replicas:
                self._add_to_fetcher(p, leader)
        return 0

    def on_metadata_update(self, topics: Iterable[str]) -> None:
        """Configs of the topics an UpdateMetadata named reach their logs here. Only those: the
        controller propagates each created topic on its own, so rebuilding every hosted partition's
        config per request made creating T topics O(T x partitions)."""
        cache = self.metadata
        for topic in topics:
            t = cache.topics.get(topic)
            if t is None or t.configs is None:
                continue
            cfg = None              # one (frozen) LogConfig shared by the topic's partitions
            for pid in t.partitions:
                p = self.partitions.get((topic, pid))
                if p is None:
                    continue
                if cfg is None:
                    cfg = LogConfig.from_configs(t.configs, defaults=self.log_defaults)
                if cfg != p.log.config:
                    p.log.config = cfg

    def stop_replica(self, topic: str, partition: int, delete: bool) -> int:
        key = (topic, partition)
        p = self.partitions.get(key)
        if p is None:
            return 0
        self._remove_from_fetcher(p)
        p.fail_waiters(NotLeaderForPartitionError.errno)
        p.notify_data()
        if delete:
            self._remove(key)
        else:
            p.leader = -1
        return 0

    def _remove(self, key: tuple[str, int]) -> None:
        p = self.partitions.pop(key, None)
        if p is not None:
            p.removed = True
            p.log.delete()          # gives its bytes back to log_memory (and its files)
            if self.log_manager is not None:
                self.log_manager.forget(p.log)
            self._remove_from_fetcher(p)
            p.fail_waiters(NotLeaderForPartitionError.errno)
            p.notify_data()

    # ------------------------------------------------------------------ fetchers
    def _add_to_fetcher(self, p: Partition, leader: int) -> None:
        f = self.fetchers.get(leader)
        if f is None:
            f = self.fetchers[leader] = ReplicaFetcher(self.node_id, leader, self.config,
                                                       self.metadata, self._on_follower_append,
                                                       self.throttle, self.network)
            f.start()
        f.add(p)

    def _on_follower_append(self, nbytes: int) -> None:
        self.stats.replication_bytes_in += nbytes
        self.log_memory.maybe_evict()

    def _remove_from_fetcher(self, p: Partition) -> None:
        for f in self.fetchers.values():
            f.remove(p)
