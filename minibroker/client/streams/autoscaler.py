"""KIP-878 autoscaling: the group leader keeps internal topics as wide as their inputs.

Run by the leader's instance before it assigns (Kafka: inside the StreamsPartitionAssignor):
1. read the partition counts of every source, repartition and changelog topic;
2. intended counts from the topology (topology.Topology.intended_counts);
3. internal topic wider than intended: an error (partitions cannot be taken back; a user error);
   narrower: with `partition.autoscaling.enabled`, CreatePartitions to the intended counts,
   else INCOMPLETE_SOURCE_TOPIC_METADATA for every instance;
4. a failed or partly failed CreatePartitions (quota, timeout, any error) schedules a follow-up
   rebalance to retry with fresh metadata (after throttle_time_ms at least). Retrying stops once
   `partition.autoscaling.timeout.ms` has passed since the first failure (reset by any success):
   a warning, `num-autoscaling-failures` + 1, and the app carries on at the old width;
5. after success, a follow-up rebalance (10 s later by default: brokers may take seconds to learn
   new partitions) assigns the new partitions; once the whole topology shows the intended counts,
   the partitioner's `on_partition_expansion(old, new)` runs, once.
Sub-topologies whose user source topics disagree (expanded out of step) are left alone until they
agree; the leader looks again after `probing.rebalance.interval.ms`.
"""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

import kafka.errors as Errors

from minibroker.client.streams.errors import (INCOMPLETE_SOURCE_TOPIC_METADATA,
                                              AssignmentError, MissingSourceTopicError)
from minibroker.client.streams.metrics import Metrics
from minibroker.client.streams.topology import Topology

log = logging.getLogger("minibroker.client.streams")


@dataclass
class Check:
    counts: dict[str, int]                       # every known topic's partition count
    intended: dict[str, int] = field(default_factory=dict)
    parallelism: dict[int, int] = field(default_factory=dict)
    under: dict[str, tuple[int, int]] = field(default_factory=dict)    # topic -> (have, want)
    over: dict[str, tuple[int, int]] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    uneven: list[int] = field(default_factory=list)       # sub-topologies with sources out of step


def check(topology, counts: dict[str, int | None]) -> Check | None:
    """Compare internal topics with what the sources call for; None while a source is unknown."""
    if any(not counts.get(t) for t in topology.external_sources):
        return None
    known = {t: n for t, n in counts.items() if n}
    c = Check(known)
    c.intended, c.parallelism = topology.intended_counts(known)
    for st in topology.subtopologies:
        ext = {known[s] for s in st.sources if s in topology.external_sources}
        if len(ext) > 1:
            c.uneven.append(st.id)
    for t in topology.internal_topics:
        have, want = known.get(t), c.intended[t]
        if have is None:
            c.missing.append(t)
        elif have < want:
            c.under[t] = (have, want)
        elif have > want:
            c.over[t] = (have, want)
    return c


class StreamsApp(Protocol):
    """What the autoscaler uses of its app (runner.KafkaStreams, which imports this module)."""
    config: dict
    admin: Any                  # minibroker.client.Admin, once started
    topology: Topology
    partitioner: Any            # partitioner.LinearHashingPartitioner, or the user's
    metrics: Metrics
    failures_metric: Any        # the num-autoscaling-failures metric's name

    def fail(self, error: BaseException) -> None: ...

    async def create_internal_topics(self, counts: dict[str, int]) -> None: ...

    def schedule_rebalance(self, delay: float) -> None: ...

    def update_parallelism_metrics(self, c: "Check") -> None: ...


class Autoscaler:
    def __init__(self, app: StreamsApp) -> None:
        self.app = app
        self.enabled = app.config["partition.autoscaling.enabled"]
        self.timeout = app.config["partition.autoscaling.timeout.ms"] / 1000
        self.followup = app.config["minibroker.partition.autoscaling.followup.ms"] / 1000
        self.probing = app.config["probing.rebalance.interval.ms"] / 1000
        self.backoff = app.config["retry.backoff.ms"] / 1000
        self.first_failure: float | None = None
        self.given_up: frozenset | None = None      # the targets we stopped retrying
        self.pending: tuple[int, int] | None = None  # (old, new) once an expansion succeeded
        self.expansions_notified = 0
        self.attempts = 0                            # CreatePartitions requests sent
        self.failed_attempts = 0                     # ... that failed for some topic

    async def counts(self, topics: list[str]) -> dict[str, int | None]:
        mds = await self.app.admin.describe_topics(topics)
        out: dict[str, int | None] = {}
        for t, md in mds.items():
            ok = md is not None and not md.error_code and md.partitions
            out[t] = (md.producer_partition_count if ok else None)
        return out

    async def on_leader(self) -> None:
        """Before the leader assigns: create, validate, expand internal topics."""
        topology = self.app.topology
        try:
            counts = await self.counts(topology.external_sources + topology.internal_topics)
        except (asyncio.TimeoutError, Errors.KafkaError) as e:
            log.warning("autoscaling: no metadata (%r); the next rebalance looks again", e)
            return
        c = check(topology, counts)
        if c is None:
            return
        self.app.update_parallelism_metrics(c)
        if c.over:
            self.app.fail(AssignmentError(
                "internal topics have more partitions than their sources call for (partitions "
                f"cannot be removed; a misconfiguration): {sorted(c.over.items())}"))
            return
        if c.missing:
            await self.app.create_internal_topics({t: c.intended[t] for t in c.missing})
        if c.uneven:
            log.info("autoscaling: sub-topologies %s have sources of different widths; waiting",
                     c.uneven)
            self.app.schedule_rebalance(self.probing)
        under = {t: hw for t, hw in c.under.items()
                 if topology.subtopology_of_internal(t) not in c.uneven}
        if under:
            if not self.enabled:
                self.app.fail(MissingSourceTopicError(
                    INCOMPLETE_SOURCE_TOPIC_METADATA,
                    f"source topics changed width; internal topics {sorted(under)} no longer "
                    "match and partition.autoscaling.enabled is false"))
                return
            await self._expand(under)
        elif self.pending is not None and not c.uneven and not c.missing:
            old, new = self.pending
            self.pending = None
            self.expansions_notified += 1
            log.info("autoscaling: topology stable at %d partitions (was %d)", new, old)
            cb = getattr(self.app.partitioner, "on_partition_expansion", None)
            if cb is not None:
                cb(old, new)

    async def _expand(self, under: dict[str, tuple[int, int]]) -> None:
        loop = asyncio.get_running_loop()
        targets = frozenset((t, want) for t, (_, want) in under.items())
        if self.given_up == targets:
            log.warning("autoscaling: gave up on %s; not retrying", sorted(targets))
            return
        now = loop.time()
        if self.first_failure is not None and now - self.first_failure >= self.timeout:
            self.first_failure = None
            self.given_up = targets
            self.app.metrics.add(self.app.failures_metric)
            log.warning("autoscaling: partition.autoscaling.timeout.ms passed since the first "
                        "failure; giving up on %s", sorted(targets))
            return
        admin = self.app.admin
        try:
            errors = await admin.create_partitions(dict(sorted(targets)), raise_on_error=False)
        except (asyncio.TimeoutError, ConnectionError, Errors.KafkaError) as e:
            errors = {t: e for t, _ in targets}
        failed = {t: e for t, e in errors.items() if e is not None}
        self.attempts += 1
        self.failed_attempts += bool(failed)
        if len(failed) < len(errors):            # any success resets the timeout
            self.first_failure = None
            self.given_up = None
            old = min(have for have, _ in under.values())
            new = max(want for _, want in under.values())
            self.pending = (min(old, self.pending[0]) if self.pending else old, new)
        if failed:
            if self.first_failure is None:
                self.first_failure = now
            log.info("autoscaling: CreatePartitions failed for %s; retrying",
                     {t: repr(e) for t, e in sorted(failed.items())})
            self.app.schedule_rebalance(max(admin.last_throttle_time_ms / 1000, self.backoff))
        else:
            self.app.schedule_rebalance(self.followup)
