"""Partition leader and ISR changes as controller operations (Kafka's ReplicationControlManager):
AlterPartition from a leader, and leader election. Plain functions of the frozen image."""
from __future__ import annotations

from kafka.errors import (FencedLeaderEpochError, InvalidUpdateVersionError,
                          NotLeaderForPartitionError, UnknownTopicOrPartitionError)

from minibroker.controller import records
from minibroker.controller.image import MetadataImage
from minibroker.controller.result import Result


def alter_partition(image: MetadataImage, broker_id: int, topic: str, partition: int,
                    leader_epoch: int, partition_epoch: int,
                    new_isr: tuple[int, ...]) -> Result[int]:
    """A leader's new ISR; response: the error code. Fenced brokers are left out of the ISR;
    an ISR without the leader, or the same ISR, writes nothing."""
    t = image.topics.get(topic)
    p = t.partitions.get(partition) if t else None
    if t is None or p is None:
        return Result((), UnknownTopicOrPartitionError.errno)
    if p.leader != broker_id:
        return Result((), NotLeaderForPartitionError.errno)
    if leader_epoch != p.leader_epoch:
        return Result((), FencedLeaderEpochError.errno)
    if partition_epoch != p.partition_epoch:
        return Result((), InvalidUpdateVersionError.errno)
    alive = {b.broker_id for b in image.live_brokers()}
    isr = [r for r in new_isr if r in alive or r == broker_id]
    if broker_id not in isr or tuple(isr) == p.isr:
        return Result((), 0)
    return Result((records.partition_change(t.topic_id, partition, isr=isr),), 0)


def elect_leader(image: MetadataImage, topic: str, partition: int,
                 preferred: int | None = None) -> Result[int]:
    """Leadership to `preferred` if it is in the ISR and alive (None: the first replica that is);
    response: the leader after the change."""
    t = image.topics[topic]
    p = t.partitions[partition]
    alive = {b.broker_id for b in image.live_brokers()}
    candidates = [preferred] if preferred is not None else list(p.replicas)
    new = next((r for r in candidates if r in p.isr and r in alive), None)
    if new is None or new == p.leader:
        return Result((), p.leader)
    return Result((records.partition_change(t.topic_id, partition, leader=new),), new)
