"""Reads of a partition's offsets and state outside Fetch: ListOffsets, OffsetForLeaderEpoch,
DescribeProducers, DescribeLogDirs, and a coordinator loading its partition. Part of
ReplicaManager (broker/replica_state.py says how the parts fit)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.errors import (NotLeaderForPartitionError, OffsetNotAvailableError,
                          UnknownTopicOrPartitionError)

from minibroker.broker.partition import Partition
from minibroker.broker.replica_state import ReplicaState
from minibroker.log.producer_state import ProducerStateEntry

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
DEBUGGING_REPLICA_ID = -2


class PartitionReads(ReplicaState):

    # ------------------------------------------------------------------ ListOffsets, OffsetForLeaderEpoch
    def list_offset(self, topic: str, partition: int, current_leader_epoch: int, timestamp: int,
                    isolation_level: int, replica_id: int) -> tuple[int, int, int, int]:
        """ListOffsets for one partition: (error code, offset, timestamp, leader epoch).
        replica_id -2 (debugging) and >= 0 get the log end offset for LATEST; consumers the HW.
        As Kafka's fetchOnlyFromLeader, -2 is answered by any replica (a follower's own log)."""
        p, err = self.leader_partition(topic, partition, current_leader_epoch,
                                       leader_only=replica_id != DEBUGGING_REPLICA_ID)
        if p is None:
            return err, -1, -1, -1
        if timestamp == LATEST and p.is_leader and p.high_watermark < p.leader_epoch_start_offset:
            # KIP-207: a new leader's HW may lag the previous leader's; don't answer low.
            return int(OffsetNotAvailableError.errno), -1, -1, -1
        offset, ts = self._lookup(p, timestamp, isolation_level, replica_id)
        epoch = p.log.epochs.epoch_for_offset(offset) if offset >= 0 else -1
        return 0, offset, ts, epoch if epoch is not None else -1

    @staticmethod
    def _lookup(p: Partition, ts: int, isolation_level: int, replica_id: int) -> tuple[int, int]:
        plog = p.log
        if ts in (EARLIEST, EARLIEST_LOCAL):
            return plog.log_start_offset, -1
        if ts == LATEST and (replica_id >= 0 or replica_id == DEBUGGING_REPLICA_ID):
            return plog.log_end_offset, -1          # Kafka: replicas and debugging see the LEO
        if ts == LATEST:
            return (p.last_stable_offset() if isolation_level else p.high_watermark), -1
        if ts == LATEST_TIERED:
            return -1, -1
        if ts == MAX_TIMESTAMP:
            found = plog.max_timestamp_offset()
            return (found[0], found[1]) if found else (-1, -1)
        found = plog.offset_for_timestamp(ts)
        if found is None or found[0] >= (p.last_stable_offset() if isolation_level
                                         else p.high_watermark):
            return -1, -1
        return found

    def end_offset_for_epoch(self, topic: str, partition: int, current_leader_epoch: int,
                             leader_epoch: int, any_replica: bool) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch for one partition: (error code, epoch, end offset), the largest
        epoch <= leader_epoch this replica knows and where it ends (-1, -1 if none).
        any_replica: a follower answers too (the debugging replica id)."""
        if any_replica:
            p = self.partitions.get((topic, partition))
            if p is None:
                known = self.metadata.partition(topic, partition) is not None
                return (NotLeaderForPartitionError.errno if known
                        else UnknownTopicOrPartitionError.errno), -1, -1
            err = self.check_epoch(p, current_leader_epoch)
        else:
            p, err = self.leader_partition(topic, partition, current_leader_epoch)
        if p is None or err:
            return err, -1, -1
        epoch, end_offset = p.log.end_offset_for_epoch(leader_epoch)
        return 0, epoch, end_offset

    def describe_producers(self, topic: str, partition: int
                           ) -> tuple[int, list[ProducerStateEntry]]:
        """DescribeProducers: (error code, the active producers of a partition we lead)."""
        p, err = self.leader_partition(topic, partition)
        if p is None:
            return err, []
        return 0, p.log.producers.entries()

    def log_sizes(self, wanted: Iterable[tuple[str, int]] | None) -> list[tuple[str, int, int]]:
        """DescribeLogDirs: (topic, partition, bytes stored) of each hosted partition (of
        `wanted`, None: all), sorted."""
        keys = sorted(self.partitions if wanted is None else set(wanted) & set(self.partitions))
        return [(t, i, self.partitions[(t, i)].log.size_bytes) for t, i in keys]

    def log_range(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset) of a hosted partition."""
        log = self.partitions[(topic, partition)].log
        return log.log_start_offset, log.log_end_offset

    def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int,
                     max_offset: int) -> list[Any]:
        """Whole stored batches of a hosted partition from `offset`, each below `max_offset`
        (a coordinator loading its partition)."""
        return self.partitions[(topic, partition)].log.read(offset, max_bytes,
                                                            max_offset=max_offset).records
