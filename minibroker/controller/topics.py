"""Topic operations of the controller: create, delete, alter configs.

Each is a plain function of the frozen image and the request: it validates and returns
Result(records, response); `Controller` appends, replays and propagates the records.
"""
from __future__ import annotations

from kafka.errors import (InvalidConfigurationError, InvalidPartitionsError,
                          InvalidReplicationAssignmentError, InvalidReplicationFactorError,
                          InvalidTopicError, PolicyViolationError, TopicAlreadyExistsError,
                          UnknownTopicOrPartitionError)

from minibroker.broker.topic_names import invalid_reason
from minibroker.controller import records
from minibroker.controller.image import MetadataImage
from minibroker.controller.placement import assign_replicas
from minibroker.controller.result import ItemResult, Result
from minibroker.ids import IdSource
from minibroker.log import config as log_config

# (name, partitions, replication factor, {partition: replicas} | None, configs); -1: the default
TopicSpec = tuple[str, int, int, "dict[int, list[int]] | None", "dict[str, str]"]
# Kafka's controller writes at most MAX_RECORDS_PER_USER_OP (10,000) records per operation and
# refuses a CreateTopics or CreatePartitions over MAX_PARTITIONS_PER_BATCH (10,000) partitions
# with POLICY_VIOLATION: one request for 100k partitions froze every broker here for minutes.
MAX_PARTITIONS_PER_BATCH = 10_000
EXCESSIVE_PARTITIONS = "Excessively large number of partitions per request."


def total_new_partitions(specs: list[TopicSpec], default_partitions: int) -> int:
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


def create_topics(image: MetadataImage, specs: list[TopicSpec], ids: IdSource,
                  defaults) -> Result[list[ItemResult]]:
    """defaults: num_partitions and default_replication_factor (the cluster config)."""
    if total_new_partitions(specs, defaults.num_partitions) > MAX_PARTITIONS_PER_BATCH:
        return Result((), [ItemResult(PolicyViolationError.errno, EXCESSIVE_PARTITIONS)
                           for _ in specs])
    out, results, names = [], [], set()
    for name, partitions, rf, assignments, configs in specs:
        if name in names:
            results.append(ItemResult(TopicAlreadyExistsError.errno,
                                      f"Topic '{name}' already exists."))
            continue
        recs, res = _create_topic(image, ids, name, partitions, rf, assignments, configs,
                                  defaults)
        results.append(res)
        if recs:
            out += recs
            names.add(name)
    return Result(tuple(out), results)


def _create_topic(image: MetadataImage, ids: IdSource, name: str, partitions: int,
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
    try:
        for k, v in sorted(configs.items()):
            log_config.validate(k, v)
        log_config.validate_all(configs)
    except ValueError as e:
        return [], ItemResult(InvalidConfigurationError.errno, str(e))
    topic_id = ids.topic_id()
    alive = {b.broker_id for b in live}
    out = [records.topic(name, topic_id),
           records.partition_count(topic_id, len(parts), len(parts))]
    out += [records.topic_config(name, k, v) for k, v in sorted(configs.items())]
    out += records.partitions(topic_id, parts, alive)
    return out, ItemResult(0, None, topic_id, len(parts), replication_factor)


def delete_topics(image: MetadataImage, names: list[str]) -> Result[list[ItemResult]]:
    out, results, gone = [], [], set()
    for name in names:
        t = image.topics.get(name) if name not in gone else None     # named twice: gone now
        gone.add(name)
        if t is None:
            results.append(ItemResult(UnknownTopicOrPartitionError.errno,
                                      "This server does not host this topic-partition."))
            continue
        out.append(records.remove_topic(t.topic_id))
        results.append(ItemResult(0, None, t.topic_id))
    return Result(tuple(out), results)


def alter_topic_configs(image: MetadataImage, name: str, changes: dict[str, str | None],
                        replace: bool) -> Result[ItemResult]:
    """changes: name → value (None deletes). replace=True is legacy AlterConfigs semantics."""
    t = image.topics.get(name)
    if t is None:
        return Result((), ItemResult(UnknownTopicOrPartitionError.errno,
                                     f"Topic {name} does not exist"))
    for k, v in sorted(changes.items()):
        if k not in log_config.DEFAULTS and k not in log_config.IGNORED_CONFIGS:
            return Result((), ItemResult(InvalidConfigurationError.errno,
                                         f"Unknown topic config name: {k}"))
        if v is not None:
            try:
                log_config.validate(k, v)
            except ValueError as e:
                return Result((), ItemResult(InvalidConfigurationError.errno, str(e)))
    after = {} if replace else dict(t.configs)
    after.update(changes)
    try:
        log_config.validate_all({k: v for k, v in after.items() if v is not None})
    except ValueError as e:
        return Result((), ItemResult(InvalidConfigurationError.errno, str(e)))
    out = []
    if replace:
        out += [records.topic_config(name, k, None) for k in sorted(set(t.configs) - set(changes))]
    out += [records.topic_config(name, k, v) for k, v in sorted(changes.items())]
    return Result(tuple(out), ItemResult(0))
