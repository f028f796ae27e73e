"""Topic operations of the controller: create, delete, add partitions, alter configs.

Each function validates against the current image and returns records (plus per-item results);
`Controller.commit` appends, replays and propagates them.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka.errors import (InvalidConfigurationError, InvalidPartitionsError,
                          InvalidReplicationAssignmentError, InvalidReplicationFactorError,
                          InvalidTopicError, TopicAlreadyExistsError,
                          UnknownTopicOrPartitionError)

from minibroker.broker.topic_names import invalid_reason
from minibroker.controller.image import MetadataImage
from minibroker.controller.placement import assign_replicas
from minibroker.log import config as log_config
from minibroker.protocol import records as R

TOPIC = 2
# Kafka's controller writes at most MAX_RECORDS_PER_USER_OP (10,000) records per operation and
# refuses a CreateTopics or CreatePartitions over MAX_PARTITIONS_PER_BATCH (10,000) partitions
# with POLICY_VIOLATION: one request for 100k partitions froze every broker here for minutes.
MAX_PARTITIONS_PER_BATCH = 10_000
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."


def total_new_partitions(specs, default_partitions: int) -> int:
    """Partitions a CreateTopics request asks for, counted as Kafka's
    validateTotalNumberOfPartitions: -1 is the default, a manual assignment counts its entries."""
    total = 0
    for _, partitions, _, assignments, _ in specs:
        if assignments:
            total += len(assignments)
        elif partitions == -1:
            total += default_partitions
        elif partitions > 0:
            total += partitions
    return total


@dataclass
class ItemResult:
    error_code: int = 0
    message: str | None = None
    topic_id: object = None
    partitions: int = -1
    replication_factor: int = -1


def create_topic_records(image: MetadataImage, ids, name: str, partitions: int,
                         replication_factor: int, assignments: dict[int, list[int]] | None,
                         configs: dict[str, str], defaults) -> tuple[list, ItemResult]:
    reason = invalid_reason(name)
    if reason:
        return [], ItemResult(InvalidTopicError.errno, reason)
    if name in image.topics:
        return [], ItemResult(TopicAlreadyExistsError.errno, f"Topic '{name}' already exists.")
    live = image.live_brokers()
    if assignments:
        parts = {p: tuple(r) for p, r in sorted(assignments.items())}
        if sorted(parts) != list(range(len(parts))):
            return [], ItemResult(InvalidReplicationAssignmentError.errno,
                                  "Partitions must be numbered 0..n-1")
        known = set(image.brokers)
        for p, reps in parts.items():
            if not reps or len(set(reps)) != len(reps) or not set(reps) <= known:
                return [], ItemResult(InvalidReplicationAssignmentError.errno,
                                      f"Invalid replica assignment for partition {p}: {reps}")
        replication_factor = len(parts[0])
    else:
        partitions = defaults.num_partitions if partitions == -1 else partitions
        replication_factor = (defaults.default_replication_factor if replication_factor == -1
                              else replication_factor)
        if partitions <= 0:
            return [], ItemResult(InvalidPartitionsError.errno,
                                  "Number of partitions must be larger than 0.")
        if replication_factor <= 0:
            return [], ItemResult(InvalidReplicationFactorError.errno,
                                  "Replication factor must be larger than 0.")
        if replication_factor > len(live):
            return [], ItemResult(
                InvalidReplicationFactorError.errno,
                f"Replication factor: {replication_factor} larger than available brokers: "
                f"{len(live)}.")
        parts = assign_replicas(live, 0, partitions, replication_factor, ids.rng)
    for k, v in sorted(configs.items()):
        try:
            log_config.validate(k, v)
        except ValueError as e:
            return [], ItemResult(InvalidConfigurationError.errno, str(e))
    topic_id = ids.topic_id()
    alive = {b.broker_id for b in live}
    records = [R.TopicRecord(name=name, topic_id=topic_id),
               R.TopicPartitionCountRecord(topic_id=topic_id, initial_partition_count=len(parts),
                                           undeleted_partition_count=len(parts))]
    for k, v in sorted(configs.items()):
        records.append(R.ConfigRecord(resource_type=TOPIC, resource_name=name, name=k, value=v))
    records += partition_records(topic_id, parts, alive)
    return records, ItemResult(0, None, topic_id, len(parts), replication_factor)


def partition_records(topic_id, parts: dict[int, tuple[int, ...]], alive: set[int],
                      after_creation: tuple[tuple[int, int], ...] = (),
                      removed_leader_epochs: tuple[tuple[int, int], ...] = ()) -> list:
    """PartitionRecords for new partitions; an index removed before (KIP-253) starts one leader
    epoch above its last incarnation's."""
    first_epoch = {p: e + 1 for p, e in removed_leader_epochs}
    out = []
    for p, reps in sorted(parts.items()):
        isr = [r for r in reps if r in alive] or list(reps)
        leader = next((r for r in reps if r in alive), -1)
        out.append(R.PartitionRecord(
            partition_id=p, topic_id=topic_id, replicas=list(reps), isr=isr,
            removing_replicas=[], adding_replicas=[], leader=leader,
            leader_epoch=first_epoch.get(p, 0),
            partition_epoch=0, leader_epoch_after_creation=[
                R.PartitionRecord.PartitionLeaderEpochAfterCreation(partition_index=k, leader_epoch=v)
                for k, v in after_creation]))
    return out


def delete_topic_records(image: MetadataImage, name: str) -> tuple[list, ItemResult]:
    t = image.topics.get(name)
    if t is None:
        return [], ItemResult(UnknownTopicOrPartitionError.errno,
                              "This server does not host this topic-partition.")
    return [R.RemoveTopicRecord(topic_id=t.topic_id)], ItemResult(0, None, t.topic_id)


def alter_topic_config_records(image: MetadataImage, name: str, changes: dict[str, str | None],
                               replace: bool) -> tuple[list, ItemResult]:
    """changes: name → value (None deletes). replace=True is legacy AlterConfigs semantics."""
    t = image.topics.get(name)
    if t is None:
        return [], ItemResult(UnknownTopicOrPartitionError.errno, f"Topic {name} does not exist")
    for k, v in sorted(changes.items()):
        if k not in log_config.DEFAULTS:
            return [], ItemResult(InvalidConfigurationError.errno,
                                  f"Unknown topic config name: {k}")
        if v is not None:
            try:
                log_config.validate(k, v)
            except ValueError as e:
                return [], ItemResult(InvalidConfigurationError.errno, str(e))
    records = []
    if replace:
        for k in sorted(set(t.configs) - set(changes)):
            records.append(R.ConfigRecord(resource_type=TOPIC, resource_name=name, name=k,
                                          value=None))
    for k, v in sorted(changes.items()):
        records.append(R.ConfigRecord(resource_type=TOPIC, resource_name=name, name=k, value=v))
    return records, ItemResult(0)
