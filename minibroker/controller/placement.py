"""Replica placement for new partitions (Kafka's rack-aware round-robin assignment)."""
from __future__ import annotations

import random

from minibroker.controller.image import BrokerRegistration


def rack_alternated(brokers: list[BrokerRegistration]) -> list[int]:
    """Broker ids ordered so consecutive ids come from different racks where possible."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers, key=lambda b: b.broker_id):
        by_rack.setdefault(b.rack or "", []).append(b.broker_id)
    racks = sorted(by_rack)
    out = []
    while any(by_rack.values()):
        for r in racks:
            if by_rack[r]:
                out.append(by_rack[r].pop(0))
    return out


def assign_replicas(brokers: list[BrokerRegistration], first_partition: int, partitions: int,
                    replication_factor: int, rng: random.Random) -> dict[int, tuple[int, ...]]:
    """partition → replicas; the leader (first replica) rotates, followers are shifted."""
    ids = rack_alternated(brokers)
    n = len(ids)
    assert 1 <= replication_factor <= n
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out = {}
    for i in range(first_partition, first_partition + partitions):
        if i > 0 and i % n == 0:
            shift += 1
        first = (start + i) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[(first + 1 + (shift + j) % (n - 1)) % n])
        out[i] = tuple(replicas)
    return out
