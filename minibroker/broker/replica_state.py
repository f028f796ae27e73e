"""What every part of the replica manager shares: the partitions this broker hosts, what it was
given to run them, and the lookups every request path starts with (leadership, leader epoch and
KIP-253 checks). ReplicaManager (broker/replica_manager.py) composes the paths built on it: the
append path, the fetch path, the offset reads, ISR changes and log maintenance, one module each.
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Callable, Protocol

from kafka.errors import (FencedLeaderEpochError, NotLeaderForPartitionError,
                          UnknownLeaderEpochError, UnknownTopicOrPartitionError)

from minibroker.broker.fetcher import ReplicaFetcher
from minibroker.broker.first_fetch import FirstFetches
from minibroker.broker.partition import Partition
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
from minibroker.protocol.errors import INVALID_PARTITION_METADATA


class AlterPartitionSender(Protocol):
    """The one controller call a replica manager makes (cluster.ControllerChannel has it)."""

    async def alter_partition(self, broker_id: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int,
                              new_isr: tuple[int, ...]) -> int: ...


class ReplicaState:
    """The state ReplicaManager.__init__ sets, declared once for the paths that read it."""
    node_id: int
    stats: BrokerStats              # bytes in/out, ISR changes: what the metrics exporter reads
    throttle: ReplicationThrottle   # replication quotas of partition moves
    config: ClusterConfig
    clock: Clock
    network: NetworkPartitions | None   # inter-broker links (replica fetchers connect through it)
    metadata: MetadataCache
    controller: AlterPartitionSender
    log_defaults: LogConfig         # a topic's configs not set default to the broker's log.*
    running: bool
    partitions: dict[tuple[str, int], Partition]
    controller_epoch: int
    topic_undeleted_counts: dict[str, int]
    fetchers: dict[int, ReplicaFetcher]
    _tasks: list[asyncio.Task[None]]
    _isr_tasks: set[asyncio.Task[None]]    # AlterPartition calls in flight (stop() cancels them)
    log_memory: LogMemory           # bytes held by this broker's logs, capped (log/memory.py)
    first_fetches: FirstFetches     # followers yet to fetch a partition we newly lead
    log_manager: LogManager | None
    new_log: Callable[[str, int, LogConfig, uuid.UUID], PartitionLog]


    # ------------------------------------------------------------------ lookups
    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1,
                         leader_only: bool = True) -> tuple[Partition | None, int]:
        """The partition if we lead it (or, leader_only=False, host it) and the client's epoch
        matches, else an error code."""
        p = self.partitions.get((topic, partition))
        if p is None:
            known = self.metadata.partition(topic, partition) is not None
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
            return int(FencedLeaderEpochError.errno)
        return int(UnknownLeaderEpochError.errno)
