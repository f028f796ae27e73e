"""kafka-reassign-partitions' --throttle and --cancel, over the wire (used by cli/reassign.py).

--execute --throttle N (bytes/s), as Kafka's tool: on every broker of the old and new replica
sets, the dynamic broker configs leader.replication.throttled.rate = follower.replication.
throttled.rate = N; per topic, leader.replication.throttled.replicas = the partitions' current
replicas (who serve the move) and follower.replication.throttled.replicas = the replicas being
added (who fetch it). --verify clears them once every move completed; --cancel cancels the moves
(KIP-455: AlterPartitionReassignments with null replicas, so the old replicas stay) and clears
them, unless --preserve-throttles.
"""
from __future__ import annotations

import sys

from kafka.protocol.admin import AlterPartitionReassignmentsRequest

from minibroker.broker.throttle import FOLLOWER_RATE, LEADER_RATE
from minibroker.client.admin import BROKER, DELETE, SET, TOPIC, Admin
from minibroker.client.records import TopicPartition

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"


async def current_replicas(admin: Admin, tps) -> dict[TopicPartition, list[int]]:
    out = {}
    for topic in sorted({tp.topic for tp in tps}):
        await admin.metadata.refresh([topic])
    for tp in tps:
        md = admin.metadata.topic(tp.topic)
        p = md.partitions.get(tp.partition) if md is not None else None
        out[tp] = list(p.replicas) if p is not None else []
    return out


async def set_throttles(admin: Admin, targets: dict[TopicPartition, list[int]],
                        current: dict[TopicPartition, list[int]], rate: int) -> None:
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for tp in sorted(targets, key=lambda tp: (tp.topic, tp.partition)):
        old, new = current.get(tp, []), targets[tp]
        brokers |= set(old) | set(new)
        leaders.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in old)
        followers.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in new
                                                  if b not in old)
    changes: dict = {(TOPIC, t): {LEADER_REPLICAS: (SET, ",".join(leaders[t])),
                                  FOLLOWER_REPLICAS: (SET, ",".join(followers[t]))}
                     for t in sorted(leaders)}
    changes.update({(BROKER, str(b)): {LEADER_RATE: (SET, str(rate)),
                                       FOLLOWER_RATE: (SET, str(rate))} for b in sorted(brokers)})
    await _alter(admin, changes)
    print(f"The inter-broker throttle limit was set to {rate} B/s")


async def clear_throttles(admin: Admin, topics: set[str]) -> None:
    await admin.metadata.fetch_all()
    brokers = sorted(admin.metadata.brokers)
    changes: dict = {(BROKER, str(b)): {LEADER_RATE: (DELETE, None), FOLLOWER_RATE: (DELETE, None)}
                     for b in brokers}
    changes.update({(TOPIC, t): {LEADER_REPLICAS: (DELETE, None),
                                 FOLLOWER_REPLICAS: (DELETE, None)} for t in sorted(topics)})
    await _alter(admin, changes)
    print(f"Clearing broker-level throttles on brokers {','.join(map(str, brokers))}")
    for t in sorted(topics):
        print(f"Clearing topic-level throttles on topic {t}")


async def throttled(admin: Admin, topics: set[str]) -> bool:
    """Whether any of `topics` has throttled replicas set (what --verify has to clear)."""
    found = await admin.describe_configs(topics=sorted(topics))
    return any(cfg.get(LEADER_REPLICAS) or cfg.get(FOLLOWER_REPLICAS) for cfg in found.values())


async def _alter(admin: Admin, changes: dict) -> None:
    results = await admin.alter_configs(changes, raise_on_error=False)
    for (_, name), e in sorted(results.items()):
        if e is not None:
            sys.exit(f"Error setting the throttle on {name}: {type(e).__name__}: {e}")


async def cancel(admin: Admin, targets: dict[TopicPartition, list[int]],
                 preserve_throttles: bool) -> None:
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    by_topic: dict[str, list] = {}
    for tp in sorted(targets, key=lambda tp: (tp.topic, tp.partition)):
        by_topic.setdefault(tp.topic, []).append(
            T.ReassignablePartition(partition_index=tp.partition, replicas=None))
    resp = await admin._to_controller(AlterPartitionReassignmentsRequest(
        timeout_ms=admin.timeout_ms, allow_replication_factor_change=True,
        topics=[T(name=n, partitions=ps) for n, ps in by_topic.items()]), hi=0)
    done, errors = [], []
    NO_REASSIGNMENT_IN_PROGRESS = 85
    for t in resp.responses:
        for p in t.partitions:
            if p.error_code == 0:
                done.append(f"{t.name}-{p.partition_index}")
            elif p.error_code != NO_REASSIGNMENT_IN_PROGRESS:
                errors.append(f"{t.name}-{p.partition_index}: {p.error_message or p.error_code}")
    if done:
        print(f"Successfully cancelled partition reassignment(s) for: {', '.join(done)}")
    else:
        print("None of the specified partition reassignments are active.")
    if not preserve_throttles:
        await clear_throttles(admin, set(by_topic))
    if errors:
        sys.exit(f"Error cancelling partition reassignment(s) for: {'; '.join(errors)}")
