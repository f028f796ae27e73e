"""KIP-1101: a group's retained memory and hash cost, per-partition rack sets vs topic hashes.

The seed's real-world case (KAFKA-17578): one consumer group, 500 members, 2,000 topic partitions,
where partition rack data was 79% of the ConsumerGroup object.  The seed gives no topic count or
replication factor; we take 20 topics x 100 partitions, replication factor 3 on 9 brokers in 3 racks
(rack-aware placement: every partition has replicas in all 3 racks), and each member subscribed to
all 20 topics with 4 partitions assigned (current and target assignment held separately).

Measured in one run with tracemalloc (bytes still allocated while the structure is alive):
- pre-KIP:  subscribed topic metadata {name: TopicMetadata(id, name, num_partitions,
            {partition: set(racks)})}, what the group held before KIP-1101;
- KIP-1101: the group's one int64 MetadataHash, and the coordinator's topic hash cache
            {name: int64} (shared by every group subscribing to those topics);
- the member model, to put the rack data in proportion as the seed does.
Timings: medians over repetitions with time.perf_counter of (a) a full recomputation (cache
cleared: 20 topic hashes + the group hash) and (b) the heartbeat path on a warm cache (20 hits +
the group hash).

Run: python benchmarks/kip1101_memory.py   (also writes benchmarks/results/kip1101_memory.txt)
"""
from __future__ import annotations

import dataclasses
import gc
import pathlib
import statistics
import sys
import time
import tracemalloc
import uuid
from collections.abc import Mapping

from _results import publish    # benchmarks/, the folder of the script
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from minibroker.coordinator.group.metadata_hash import (  # noqa: E402
    TopicHashCache,
    compute_group_metadata_hash,
)

MEMBERS = 500
TOPICS = 20
PARTITIONS_PER_TOPIC = 100
REPLICATION_FACTOR = 3
RACKS = ("rack-a", "rack-b", "rack-c")
BROKERS = {b: RACKS[b % 3] for b in range(9)}          # 3 brokers per rack
REPS = 25


@dataclasses.dataclass(frozen=True)
class TopicImage:                 # what the coordinator reads from the metadata image
    topic_id: uuid.UUID
    name: str
    partitions: Mapping[int, tuple[int, ...]]


@dataclasses.dataclass(slots=True)
class TopicMetadata:              # the pre-KIP-1101 per-group subscription metadata
    topic_id: uuid.UUID
    name: str
    num_partitions: int
    partition_racks: dict[int, set[str]]


@dataclasses.dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: set[str]
    assigned_partitions: dict[uuid.UUID, set[int]]
    target_partitions: dict[uuid.UUID, set[int]]


def build_image() -> dict[str, TopicImage]:
    image = {}
    for t in range(TOPICS):
        name = f"topic-{t:02d}"
        partitions = {p: tuple((p + t + 3 * r + r) % 9 for r in range(REPLICATION_FACTOR))
                      for p in range(PARTITIONS_PER_TOPIC)}
        for replicas in partitions.values():
            assert len({BROKERS[b] for b in replicas}) == 3, replicas   # one replica per rack
        image[name] = TopicImage(uuid.UUID(int=0xA000 + t), name, partitions)
    return image


def build_members(image: dict[str, TopicImage]) -> list[Member]:
    all_tp = [(t.topic_id, p) for t in image.values() for p in t.partitions]
    members = []
    for m in range(MEMBERS):
        assigned: dict[uuid.UUID, set[int]] = {}
        for topic_id, p in all_tp[m::MEMBERS]:
            assigned.setdefault(topic_id, set()).add(p)
        members.append(Member(
            member_id=uuid.UUID(int=m).hex[:22], instance_id=None, rack_id=None,
            client_id=f"consumer-app-{m}", client_host=f"/10.0.{m // 250}.{m % 250}",
            subscribed_topic_names=set(image), assigned_partitions=assigned,
            target_partitions={k: set(v) for k, v in assigned.items()}))
    return members


def build_pre_kip_metadata(image: dict[str, TopicImage]) -> dict[str, TopicMetadata]:
    return {name: TopicMetadata(t.topic_id, name, len(t.partitions),
                                {p: {BROKERS[b] for b in replicas} for p, replicas in t.partitions.items()})
            for name, t in image.items()}


def measure(build):
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    obj = build()
    gc.collect()
    return obj, tracemalloc.get_traced_memory()[0] - before


def median_us(fn) -> float:
    samples = []
    for _ in range(REPS):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> list[str]:
    image = build_image()
    cache = TopicHashCache(BROKERS.get)

    tracemalloc.start()
    members, members_bytes = measure(lambda: build_members(image))
    pre_kip, pre_kip_bytes = measure(lambda: build_pre_kip_metadata(image))
    _racks_only, racks_bytes = measure(lambda: [{p: {BROKERS[b] for b in r} for p, r in t.partitions.items()}
                                                for t in image.values()])
    _, cache_bytes = measure(lambda: [cache.get(n, t) for n, t in image.items()] and None)
    tracemalloc.stop()
    group_hash = compute_group_metadata_hash({n: cache.get(n, t) for n, t in image.items()})
    hash_bytes = sys.getsizeof(group_hash)      # one Python int; 8 bytes in the record

    def full() -> int:
        cache.clear()
        return compute_group_metadata_hash({n: cache.get(n, t) for n, t in image.items()})

    def warm() -> int:
        return compute_group_metadata_hash({n: cache.get(n, t) for n, t in image.items()})

    assert full() == warm() == group_hash
    full_us, warm_us = median_us(full), median_us(warm)

    pre_total = members_bytes + pre_kip_bytes
    post_total = members_bytes + hash_bytes
    kib = 1024
    lines = [
        f"KIP-1101 memory: 1 group, {MEMBERS} members, {TOPICS} topics x {PARTITIONS_PER_TOPIC} partitions "
        f"= {TOPICS * PARTITIONS_PER_TOPIC} partitions, RF {REPLICATION_FACTOR}, {len(RACKS)} racks",
        f"(python {sys.version.split()[0]}, tracemalloc, retained bytes)",
        "",
        f"{'members (ids, subscriptions, current + target assignment)':<62}{members_bytes / kib:>10.1f} KiB",
        f"{'pre-KIP subscribed topic metadata (rack set per partition)':<62}{pre_kip_bytes / kib:>10.1f} KiB",
        f"{'  of which the per-partition rack sets':<62}{racks_bytes / kib:>10.1f} KiB",
        f"{'KIP-1101 group MetadataHash (one int64, sys.getsizeof)':<62}{hash_bytes:>10d} B",
        f"{'KIP-1101 coordinator topic hash cache (shared, 20 entries)':<62}{cache_bytes / kib:>10.1f} KiB",
        "",
        f"group total pre-KIP   {pre_total / kib:>10.1f} KiB   (rack sets = {racks_bytes / pre_total:.0%} of it;"
        f" the seed saw 79% in Java)",
        f"group total KIP-1101  {post_total / kib:>10.1f} KiB   (+ {cache_bytes / kib:.1f} KiB cache shared by all groups)",
        f"saved per group       {(pre_total - post_total) / kib:>10.1f} KiB   ({1 - post_total / pre_total:.0%})",
        "(the member model is ours and Python's per-member dicts/sets weigh more than Java's, hence a",
        " lower share than the seed's; the rack-set bytes themselves are what KIP-1101 removes)",
        "",
        f"median of {REPS} runs:",
        f"{'  full recomputation (cache cleared: 20 topic hashes + group hash)':<68}{full_us:>9.1f} us",
        f"{'  warm cache (20 hits + group hash)':<68}{warm_us:>9.1f} us"
        f"   ({full_us / warm_us:.0f}x faster)",
        f"cache counters after the run: hits={cache.hits} misses={cache.misses}",
    ]
    return lines


if __name__ == "__main__":
    publish("kip1101_memory.txt", main())
