"""The partitions a broker hosts, as leader or follower, and the background work around them.

Owns: partition state changes from LeaderAndIsr / StopReplica, appends (Produce) and reads
(Fetch), the replica fetchers of follower partitions, ISR shrinking, and log retention.
Handlers call in here; nobody reaches into PartitionLog directly.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from kafka.errors import (FencedLeaderEpochError, NotLeaderForPartitionError,
                          OffsetOutOfRangeError, PolicyViolationError,
                          StaleControllerEpochError, UnknownLeaderEpochError,
                          UnknownTopicOrPartitionError)

from minibroker.broker.first_fetch import FirstFetches
from minibroker.broker.partition import Partition
from minibroker.protocol.errors import INVALID_PARTITION_METADATA
from minibroker.log.config import LogConfig
from minibroker.log.memory import LogMemory

if TYPE_CHECKING:
    from minibroker.broker.broker import Broker

log = logging.getLogger("minibroker.replica")


class ReplicaManager:
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.node_id = broker.node_id
        self.clock = broker.clock
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.controller_epoch = -1
        self.topic_undeleted_counts: dict[str, int] = {}
        self.fetchers: dict[int, "ReplicaFetcher"] = {}
        self._tasks: list[asyncio.Task] = []
        # Bytes held by this broker's logs, capped by log.memory.max.bytes (minibroker.log.memory).
        self.log_memory = LogMemory(broker.config.log_memory_max_bytes)
        # Followers yet to fetch a partition we newly lead, and their waiting fetches.
        self.first_fetches = FirstFetches()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._isr_shrink_loop()),
                       loop.create_task(self._retention_loop())]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for f in list(self.fetchers.values()):
            await f.stop()
        self.fetchers.clear()
        for p in self.partitions.values():
            p.fail_waiters(NotLeaderForPartitionError.errno)
            p.notify_data()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    # ------------------------------------------------------------------ lookups
    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1,
                         leader_only: bool = True) -> tuple[Partition | None, int]:
        """The partition if we lead it (or, leader_only=False, host it) and the client's epoch
        matches, else an error code."""
        p = self.partitions.get((topic, partition))
        if p is None:
            known = self.broker.metadata.partition(topic, partition) is not None
            return None, (NotLeaderForPartitionError.errno if known
                          else UnknownTopicOrPartitionError.errno)
        if current_leader_epoch >= 0:
            err = self.check_epoch(p, current_leader_epoch)
            if err:
                return None, err
        if leader_only and p.leader != self.node_id:
            return None, NotLeaderForPartitionError.errno
        return p, 0

    @staticmethod
    def check_partition_metadata(p: Partition, undeleted_partition_count: int,
                                 producing: bool) -> int:
        """KIP-253: a client's undeleted partition count must equal the leader's (from the latest
        LeaderAndIsr), newer or older; -1 is a legacy client and is not compared. Writes into a
        partition marked for deletion are refused for every producer, legacy ones included: it
        must drain, and a write there could be delivered after a newer record of its key."""
        if not p.log.config.enable_ordered_delivery:
            return 0
        if undeleted_partition_count >= 0 and \
                undeleted_partition_count != p.undeleted_partition_count:
            return INVALID_PARTITION_METADATA
        if producing and p.leader_epoch_before_deletion:
            return INVALID_PARTITION_METADATA
        return 0

    @staticmethod
    def check_epoch(p: Partition, current_leader_epoch: int) -> int:
        if current_leader_epoch < 0 or current_leader_epoch == p.leader_epoch:
            return 0
        if current_leader_epoch < p.leader_epoch:
            return FencedLeaderEpochError.errno
        return UnknownLeaderEpochError.errno

    def delete_records(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords on the leader: move the log start offset up to `offset` (-1: the high
        watermark), never past the high watermark. Returns (low_watermark, error_code); followers
        follow through the log_start_offset of their fetch responses."""
        p, err = self.leader_partition(topic, partition)
        if err:
            return -1, err
        if not p.log.config.deletes:
            return -1, PolicyViolationError.errno
        if offset == -1:
            offset = p.high_watermark
        if offset < 0 or offset > p.high_watermark:
            return -1, OffsetOutOfRangeError.errno
        low_watermark = p.log.delete_records_before(offset)
        p.notify_data()
        return low_watermark, 0

    # ------------------------------------------------------------------ LeaderAndIsr
    def check_controller_epoch(self, controller_epoch: int) -> int:
        if controller_epoch < self.controller_epoch:
            return StaleControllerEpochError.errno
        self.controller_epoch = controller_epoch
        return 0

    def apply_partition_state(self, topic: str, topic_id: uuid.UUID, partition: int, leader: int,
                              leader_epoch: int, partition_epoch: int, isr, replicas,
                              undeleted_partition_count: int, configs: dict[str, str],
                              after_creation=(), before_deletion=()) -> int:
        key = (topic, partition)
        p = self.partitions.get(key)
        if p is not None and p.topic_id != topic_id:
            self._remove(key)           # a deleted and re-created topic of the same name
            p = None
        if p is None:
            p = Partition(self, topic, topic_id, partition, LogConfig.from_configs(configs, defaults=self.broker.log_defaults))
            self.partitions[key] = p
        elif (leader_epoch, partition_epoch) < (p.leader_epoch, p.partition_epoch):
            return StaleControllerEpochError.errno
        if configs:
            p.log.config = LogConfig.from_configs(configs, defaults=self.broker.log_defaults)
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

    def on_metadata_update(self, topics) -> None:
        """Configs of the topics an UpdateMetadata named reach their logs here. Only those: the
        controller propagates each created topic on its own, so rebuilding every hosted partition's
        config per request made creating T topics O(T x partitions)."""
        cache = self.broker.metadata
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
                    cfg = LogConfig.from_configs(t.configs, defaults=self.broker.log_defaults)
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

    def _remove(self, key) -> None:
        p = self.partitions.pop(key, None)
        if p is not None:
            p.log.truncate_fully_and_start_at(0)    # gives its bytes back to log_memory
            self.log_memory.unregister(p.log)
            self._remove_from_fetcher(p)
            p.fail_waiters(NotLeaderForPartitionError.errno)
            p.notify_data()

    # ------------------------------------------------------------------ fetchers
    def _add_to_fetcher(self, p: Partition, leader: int) -> None:
        from minibroker.broker.fetcher import ReplicaFetcher
        f = self.fetchers.get(leader)
        if f is None:
            f = self.fetchers[leader] = ReplicaFetcher(self, leader)
            f.start()
        f.add(p)

    def _remove_from_fetcher(self, p: Partition) -> None:
        for f in self.fetchers.values():
            f.remove(p)

    # ------------------------------------------------------------------ ISR
    def request_isr_change(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        if p.isr_change_in_flight or not self.broker.running:
            return
        p.isr_change_in_flight = True
        p.pending_isr = tuple(new_isr)
        asyncio.get_running_loop().create_task(self._alter_partition(p, new_isr))

    async def _alter_partition(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        before = p.isr
        try:
            code = await self.broker.controller.alter_partition(
                self.node_id, p.topic, p.partition, p.leader_epoch, p.partition_epoch, new_isr)
            if code == 0:
                self._isr_changed(p, before, new_isr)
        except Exception:  # noqa: BLE001 — the next check retries
            log.exception("broker %d: AlterPartition %s-%d failed", self.node_id, p.topic,
                          p.partition)
        finally:
            p.isr_change_in_flight = False
            p.pending_isr = ()

    def _isr_changed(self, p: Partition, before: tuple, after: tuple) -> None:
        """Kafka's IsrShrinksPerSec / IsrExpandsPerSec and its INFO line for each change."""
        if tuple(after) == tuple(before):
            return
        stats = self.broker.stats
        if len(after) < len(before):
            stats.isr_shrinks += 1
            what = "Shrinking"
        else:
            stats.isr_expands += 1
            what = "Expanding"
        log.info("broker %d: [Partition %s-%d] %s ISR from %s to %s", self.node_id, p.topic,
                 p.partition, what, ",".join(map(str, before)), ",".join(map(str, after)))

    async def _isr_shrink_loop(self) -> None:
        lag_ms = self.broker.config.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(lag_ms / 2000)
            now = self.clock.now_ms()
            for key in sorted(self.partitions):
                p = self.partitions[key]
                if p.is_leader and not p.isr_change_in_flight:
                    out = p.out_of_sync_replicas(now, lag_ms)
                    if out:
                        self.request_isr_change(p, tuple(r for r in p.isr if r not in out))

    async def _retention_loop(self) -> None:
        interval = self.broker.config.log_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            self.apply_retention()

    def apply_retention(self) -> None:
        now = self.clock.now_ms()
        for key in sorted(self.partitions):
            p = self.partitions[key]
            if p.is_leader and p.log.apply_retention(now, p.high_watermark):
                p.notify_data()
