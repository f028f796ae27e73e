"""KIP-253 pieces shared by the reference producer and consumer.

- `linear_hashing_partitioner(topic, key, topic_metadata)`: the producer's partitioner (part 5)
  over N = initial_partition_count and U = undeleted_partition_count (minibroker.partitioning);
  a topic whose broker reports no counts (a stock broker) falls back to Kafka's default
  `murmur2(key) & 0x7fffffff % partition_count`.
- `partition_leader_epochs`: PartitionLeaderEpochsForPartitions (key 1001, any broker answers):
  {partition: (leaderEpochAfterCreation, leaderEpochBeforeDeletion)} as dicts.
- `epoch_end_offset`: OffsetForLeaderEpoch to the partition's leader, fenced with the leader epoch
  the client's metadata shows (so a leader that has not yet taken the controller's bumped epoch
  answers UNKNOWN_LEADER_EPOCH instead of a log end offset that is still moving).  Returns the end
  offset of the epoch: one past the last offset written under it (-1: no record under any epoch
  up to it).  The seed's lowerOffsetThreshold/upperOffsetThreshold is "the last offset of messages
  published under the oldLeaderEpoch", i.e. this end offset minus one; callers compare with the
  end offset (position > last  <=>  position >= end).
"""
from __future__ import annotations

import kafka.errors as Errors
from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from minibroker.client.connection_pool import ConnectionPool
from minibroker.client.metadata import ClusterMetadata, TopicMetadata
from minibroker.partitioning import key_hash, partition_for_key
from minibroker.protocol.errors import for_code
from minibroker.protocol.messages import (PartitionLeaderEpochsForPartitionsRequest,
                                          PartitionLeaderEpochsForPartitionsResponse)

__all__ = ["kip253_counts", "linear_hashing_partitioner", "marked_for_deletion",
           "partition_leader_epochs", "epoch_end_offset"]


def kip253_counts(md: TopicMetadata) -> tuple[int, int] | None:
    """(N, U) when the broker reports usable KIP-253 counts, else None."""
    n, u = md.initial_partition_count, md.undeleted_partition_count
    if n >= 1 and u >= n and all(p in md.partitions for p in range(u)):
        return n, u
    return None


def marked_for_deletion(md: TopicMetadata) -> list[int]:
    """Partitions that still exist but are at or above the undeleted count (part 3)."""
    counts = kip253_counts(md)
    if counts is None:
        return []
    return sorted(p for p in md.partitions if p >= counts[1])


def linear_hashing_partitioner(topic: str, key: bytes | None, md: TopicMetadata,
                               counter: int = 0) -> int:
    counts = kip253_counts(md)
    if key is None:
        return counter % (counts[1] if counts else md.producer_partition_count)
    if counts is None:
        return key_hash(key) % md.producer_partition_count
    return partition_for_key(key, *counts)


async def partition_leader_epochs(pool: ConnectionPool, topic: str, partitions: list[int],
                                  timeout: float | None = None
                                  ) -> dict[int, tuple[dict[int, int], dict[int, int]]]:
    node, conn = await pool.any_connection()
    R = PartitionLeaderEpochsForPartitionsRequest
    req = R(topics=[R.PartitionLeaderEpochsForPartitionsRequestTopic(
        topic=topic, partitions=sorted(partitions))])
    try:
        resp = await conn.request(req, 0, timeout=timeout or pool.request_timeout,
                                  response_class=PartitionLeaderEpochsForPartitionsResponse)
    except Exception:
        pool.close_node(node, "PartitionLeaderEpochsForPartitions failed")
        raise
    if resp.error_code:
        raise for_code(resp.error_code)(f"PartitionLeaderEpochsForPartitions {topic}")
    out = {}
    for t in resp.topics:
        if t.error_code:
            raise for_code(t.error_code)(f"PartitionLeaderEpochsForPartitions {topic}")
        for p in t.partitions:
            if p.error_code:
                raise for_code(p.error_code)(f"PartitionLeaderEpochsForPartitions {topic}-{p.partition}")
            out[p.partition] = ({e.partition_index: e.leader_epoch for e in p.leader_epoch_after_creation},
                                {e.partition_index: e.leader_epoch for e in p.leader_epoch_before_deletion})
    return out


async def epoch_end_offset(pool: ConnectionPool, metadata: ClusterMetadata, topic: str,
                           partition: int, epoch: int) -> int:
    """End offset of `epoch` on the leader of topic-partition (see the module docstring).

    Raises a retriable KafkaError while the leader does not yet have a leader epoch above
    `epoch` (its metadata or ours lags); the caller retries later."""
    current = metadata.leader_epoch(topic, partition)
    leader = metadata.leader(topic, partition)
    if leader < 0:
        metadata.request_update(topic)
        raise Errors.LeaderNotAvailableError(f"{topic}-{partition}")
    if current <= epoch:
        metadata.request_update(topic)
        raise Errors.UnknownLeaderEpochError(
            f"{topic}-{partition}: metadata epoch {current} not yet above {epoch}")
    T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    req = OffsetForLeaderEpochRequest(replica_id=-1, topics=[T(topic=topic, partitions=[
        T.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current,
                                   leader_epoch=epoch)])])
    try:
        resp = await pool.request(leader, req, lo=2, hi=4)
    except (ConnectionError, Errors.KafkaConnectionError, OSError):
        pool.close_node(leader, "OffsetForLeaderEpoch failed")
        metadata.request_update(topic)
        raise
    p = resp.topics[0].partitions[0]
    if p.error_code:
        metadata.request_update(topic)
        raise for_code(p.error_code)(f"OffsetForLeaderEpoch {topic}-{partition} epoch {epoch}")
    return p.end_offset
