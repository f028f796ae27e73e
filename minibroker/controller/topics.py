"""Topic operations of the controller: create, delete, alter configs.

Each is a plain function of the frozen image and the request: it validates and returns
Result(records, response); `Controller` appends, replays and propagates the records.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kafka.errors import (InvalidConfigurationError, InvalidPartitionsError,
                          InvalidReplicationAssignmentError, InvalidReplicationFactorError,
                          InvalidTopicError, PolicyViolationError, TopicAlreadyExistsError,
                          UnknownTopicOrPartitionError)

from minibroker.config import ClusterConfig
from minibroker.protocol.topic_names import invalid_reason
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
                  defaults: ClusterConfig) -> Result[list[ItemResult]]:
    """defaults: num_partitions and default_replication_factor (the cluster config)."""
    plans, results = plan_topics(image, specs, ids, defaults)
    return Result(tuple(r for plan in plans for r in plan.records()), results)


@dataclass(frozen=True, slots=True)
class TopicPlan:
    """A topic CreateTopics will create: everything decided; its records built on demand, a
    range of partitions at a time (10,000 PartitionRecords take ~0.4 s to build)."""
    name: str
    topic_id: uuid.UUID
    parts: tuple[tuple[int, tuple[int, ...]], ...]      # (partition, replicas), in order
    configs: dict[str, str]
    alive: frozenset[int]

    def head(self) -> list[Any]:
        """The records before the partitions': the topic, its count and configs."""
        n = len(self.parts)
        return ([records.topic(self.name, self.topic_id),
                 records.partition_count(self.topic_id, n, n)]
                + [records.topic_config(self.name, k, v) for k, v in sorted(self.configs.items())])

    def partition_records(self, start: int, end: int) -> list[Any]:
        return records.partitions(self.topic_id, dict(self.parts[start:end]), self.alive)

    def records(self) -> list[Any]:
        return self.head() + self.partition_records(0, len(self.parts))


def plan_topics(image: MetadataImage, specs: list[TopicSpec], ids: IdSource,
                defaults: ClusterConfig) -> tuple[list[TopicPlan], list[ItemResult]]:
    """Validate and place every topic of a CreateTopics: (the topics to create, the answers)."""
    if total_new_partitions(specs, defaults.num_partitions) > MAX_PARTITIONS_PER_BATCH:
        return [], [ItemResult(PolicyViolationError.errno, EXCESSIVE_PARTITIONS) for _ in specs]
    plans: list[TopicPlan] = []
    results: list[ItemResult] = []
    names: set[str] = set()
    limit = getattr(defaults, "max_partitions", MAX_PARTITIONS_DEFAULT)
    total = total_partitions(image) if limit < MAX_PARTITIONS_DEFAULT else 0
    for name, partitions, rf, assignments, configs in specs:
        if name in names:
            results.append(ItemResult(TopicAlreadyExistsError.errno,
                                      f"Topic '{name}' already exists."))
            continue
        plan, res = _create_topic(image, ids, name, partitions, rf, assignments, configs,
                                  defaults)
        if plan is not None and total + len(plan.parts) > limit:
            res = ItemResult(PolicyViolationError.errno, partition_limit_reason(
                len(plan.parts), total, limit))
            plan = None
        results.append(res)
        if plan is not None:
            plans.append(plan)
            names.add(name)
            total += len(plan.parts)
    return plans, results


# KIP-578's max.partitions (a minibroker extension: the KIP was never adopted by Kafka): the
# partitions the whole cluster may hold, internal topics and auto-created ones included.
MAX_PARTITIONS_DEFAULT = 2**31 - 1


def total_partitions(image: MetadataImage) -> int:
    return sum(len(t.partitions) for t in image.topics.values())


def partition_limit_reason(adding: int, total: int, limit: int) -> str:
    return (f"Adding {adding} partitions would bring the cluster to {total + adding} "
            f"partitions, over max.partitions={limit}")


def _create_topic(image: MetadataImage, ids: IdSource, name: str, partitions: int,
                  replication_factor: int, assignments: dict[int, list[int]] | None,
                  configs: dict[str, str], defaults: ClusterConfig
                  ) -> tuple[TopicPlan | None, ItemResult]:
    reason = invalid_reason(name)
    if reason:
        return None, ItemResult(InvalidTopicError.errno, reason)
    if name in image.topics:
        return None, ItemResult(TopicAlreadyExistsError.errno, f"Topic '{name}' already exists.")
    live = image.live_brokers()
    if assignments:
        parts = {p: tuple(r) for p, r in sorted(assignments.items())}
        if sorted(parts) != list(range(len(parts))):
            return None, ItemResult(InvalidReplicationAssignmentError.errno,
                                  "Partitions must be numbered 0..n-1")
        known = set(image.brokers)
        for p, reps in parts.items():
            if not reps or len(set(reps)) != len(reps) or not set(reps) <= known:
                return None, ItemResult(InvalidReplicationAssignmentError.errno,
                                      f"Invalid replica assignment for partition {p}: {reps}")
        replication_factor = len(parts[0])
    else:
        partitions = defaults.num_partitions if partitions == -1 else partitions
        replication_factor = (defaults.default_replication_factor if replication_factor == -1
                              else replication_factor)
        if partitions <= 0:
            return None, ItemResult(InvalidPartitionsError.errno,
                                  "Number of partitions must be larger than 0.")
        if replication_factor <= 0:
            return None, ItemResult(InvalidReplicationFactorError.errno,
                                  "Replication factor must be larger than 0.")
        if replication_factor > len(live):
            return None, ItemResult(
                InvalidReplicationFactorError.errno,
                f"Replication factor: {replication_factor} larger than available brokers: "
                f"{len(live)}.")
        parts = assign_replicas(live, 0, partitions, replication_factor, ids.rng)
    try:
        for k, v in sorted(configs.items()):
            log_config.validate(k, v)
        log_config.validate_all(configs)
    except ValueError as e:
        return None, ItemResult(InvalidConfigurationError.errno, str(e))
    topic_id = ids.topic_id()
    plan = TopicPlan(name, topic_id, tuple(sorted(parts.items())), dict(configs),
                     frozenset(b.broker_id for b in live))
    return plan, ItemResult(0, None, topic_id, len(parts), replication_factor)


def delete_topics(image: MetadataImage, names: list[str]) -> Result[list[ItemResult]]:
    out: list[Any] = []
    results: list[ItemResult] = []
    gone: set[str] = set()
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
    after: dict[str, str | None] = {} if replace else dict(t.configs)
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
