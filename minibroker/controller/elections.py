"""ElectLeaders (KIP-460) as one controller operation: preferred or unclean leader election for
many partitions, all changes in one commit. A plain function of the frozen image.

Per partition, as Kafka's ReplicationControlManager.electLeader:
- PREFERRED (0): the first replica becomes leader if it is alive and in the ISR; already leader
  -> ELECTION_NOT_NEEDED; otherwise PREFERRED_LEADER_NOT_AVAILABLE.
- UNCLEAN (1): a partition with a live leader -> ELECTION_NOT_NEEDED; else the first live replica
  in the ISR, else the first live replica at all (the ISR becomes just it: acknowledged writes
  it lacks are lost, the point of an unclean election); none alive -> ELIGIBLE_LEADERS_NOT_AVAILABLE.
`partitions` None: every partition that needs an election (Kafka's "all partitions" form), and
only those are answered.

Automatic preferred-leader rebalancing (`auto.leader.rebalance.enable`, every
`leader.imbalance.check.interval.seconds`; `rebalance_loop`): as Kafka's
checkAndTriggerAutoLeaderRebalance, per broker the partitions whose preferred replica (the first)
it is but whose leader is another; past `leader.imbalance.per.broker.percentage` of its preferred
partitions, a preferred election for those of them where it is alive and in the ISR. Partitions
being reassigned or marked for deletion (KIP-253) are left alone, as Kafka leaves partitions being
reassigned or deleted.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from kafka.errors import (ElectionNotNeededError, EligibleLeadersNotAvailableError,
                          PreferredLeaderNotAvailableError, UnknownTopicOrPartitionError)

from minibroker.clock import Clock
from minibroker.controller import records
from minibroker.controller.image import MetadataImage
from minibroker.controller.result import ControllerHalted, ControllerMoved, Result

log = logging.getLogger("minibroker.controller")

PREFERRED, UNCLEAN = 0, 1
_STRATEGY = {PREFERRED: "PreferredReplicaPartitionLeaderElectionStrategy",
             UNCLEAN: "UncleanPartitionLeaderElectionStrategy"}

# (topic, partition, error code, error message)
ElectionResult = tuple[str, int, int, "str | None"]


def elect_leaders(image: MetadataImage, election_type: int,
                  partitions: list[tuple[str, int]] | None) -> Result[list[ElectionResult]]:
    alive = {b.broker_id for b in image.live_brokers()}
    everything = partitions is None
    if partitions is None:
        partitions = [(name, i) for name in sorted(image.topics)
                      for i in sorted(image.topics[name].partitions)]
    out: list[Any] = []
    results: list[ElectionResult] = []
    for topic, index in partitions:
        t = image.topics.get(topic)
        p = t.partitions.get(index) if t else None
        if t is None or p is None:
            results.append((topic, index, UnknownTopicOrPartitionError.errno,
                            f"The partition {topic}-{index} does not exist."))
            continue
        new, isr = None, None
        if election_type == PREFERRED:
            preferred = p.replicas[0] if p.replicas else -1
            if p.leader == preferred:
                code = ElectionNotNeededError.errno
            elif preferred in p.isr and preferred in alive:
                new, code = preferred, 0
            else:
                code = PreferredLeaderNotAvailableError.errno
        elif p.leader >= 0 and p.leader in alive:
            code = ElectionNotNeededError.errno
        else:
            in_isr = [r for r in p.replicas if r in p.isr and r in alive]
            any_live = [r for r in p.replicas if r in alive]
            if in_isr:
                new, code = in_isr[0], 0
            elif any_live:
                new, isr, code = any_live[0], [any_live[0]], 0
            else:
                code = EligibleLeadersNotAvailableError.errno
        if everything and code == ElectionNotNeededError.errno:
            continue
        if new is not None:
            out.append(records.partition_change(t.topic_id, index, leader=new, isr=isr))
        message = None
        if code == ElectionNotNeededError.errno:
            message = "Leader election not needed for topic partition."
        elif code:
            message = (f"Failed to elect leader for partition {topic}-{index} under strategy "
                       f"{_STRATEGY[election_type]}")
        results.append((topic, index, code, message))
    return Result(tuple(out), results)


def imbalanced_partitions(image: MetadataImage, per_broker_percentage: int
                          ) -> list[tuple[str, int]]:
    """The partitions a rebalance round moves to their preferred replica, in (topic, index)
    order: those of every broker past the imbalance ratio, where that broker can lead."""
    alive = {b.broker_id for b in image.live_brokers()}
    preferred_count: dict[int, int] = {}
    imbalanced: dict[int, list[tuple[str, int]]] = {}
    for name in sorted(image.topics):
        for index, p in sorted(image.topics[name].partitions.items()):
            if not p.replicas or p.reassigning or p.marked_for_deletion:
                continue
            preferred = p.replicas[0]
            preferred_count[preferred] = preferred_count.get(preferred, 0) + 1
            if p.leader != preferred and preferred in alive and preferred in p.isr:
                imbalanced.setdefault(preferred, []).append((name, index))
    out = []
    for broker in sorted(imbalanced):
        if len(imbalanced[broker]) * 100 > per_broker_percentage * preferred_count[broker]:
            out += imbalanced[broker]
    return sorted(out)


class RebalanceHost(Protocol):
    """What the rebalance task uses of the controller."""
    running: bool
    clock: Clock

    async def rebalance_leaders(self, per_broker_percentage: int) -> list[tuple[str, int]]: ...


async def rebalance_loop(ctl: RebalanceHost, interval_s: float, per_broker_percentage: int
                         ) -> None:
    """Kafka's auto leader rebalance, on the controller while it is active."""
    while ctl.running:
        await ctl.clock.sleep(interval_s)
        try:
            moved = await ctl.rebalance_leaders(per_broker_percentage)
        except (ControllerMoved, ControllerHalted):
            return                      # no longer the active controller: the next one runs it
        except Exception:  # noqa: BLE001 — logged; the next round tries again
            log.exception("controller: preferred leader rebalancing failed")
            continue
        if moved:
            log.info("controller: moved the leadership of %d partitions back to their preferred "
                     "replicas: %s", len(moved), ", ".join(f"{t}-{p}" for t, p in moved[:20]))
