"""KIP-1101 topic and group metadata hashes, and the coordinator's topic hash cache."""
from __future__ import annotations

import dataclasses
import struct
import uuid
from collections.abc import Mapping

import mmh3
import pytest

from minibroker.coordinator.group.metadata_hash import (
    TopicHashCache,
    compute_group_metadata_hash,
    compute_topic_hash,
)

TOPIC_ID = uuid.UUID("a3b1c2d4-0000-4000-8000-00000000beef")
OTHER_ID = uuid.UUID("a3b1c2d4-0000-4000-8000-00000000bef0")
RACKS = {0: ["rack-a", "rack-b"], 1: ["rack-b", "rack-c"], 2: ["rack-c", "rack-a"]}


def test_murmur3_is_guavas_murmur3_128_as_long() -> None:
    # Guava's Murmur3Hash128Test known values (seed 0), first long of the 128-bit hash.
    assert mmh3.hash64(b"hell", seed=0, signed=False)[0] == 0x629942693E10F867
    assert mmh3.hash64(b"The quick brown fox jumps over the lazy dog", seed=0, signed=False)[0] == 0xE34BBC7BBC071B6C


def test_topic_hash_byte_layout() -> None:
    # Spelled out once: magic, msb LE, lsb LE, name, count (long), then per partition id (int) +
    # rack-hash sum (long).
    def h(data: bytes) -> int:
        return mmh3.hash64(data, seed=0, signed=True)[0]

    rack_sum = (h(b"r1") + h(b"r2")) & (2**64 - 1)
    msb, lsb = TOPIC_ID.int >> 64, TOPIC_ID.int & (2**64 - 1)
    data = (b"\x00" + struct.pack("<QQ", msb, lsb) + b"t" + struct.pack("<q", 1)
            + struct.pack("<i", 0) + struct.pack("<Q", rack_sum))
    assert compute_topic_hash(TOPIC_ID, "t", {0: ["r2", "r1"]}) == h(data)


def test_topic_hash_is_a_signed_int64_and_stable() -> None:
    value = compute_topic_hash(TOPIC_ID, "orders", RACKS)
    assert -(2**63) <= value < 2**63
    assert value == compute_topic_hash(TOPIC_ID.bytes, "orders", dict(RACKS))


def test_rack_order_partition_order_and_duplicates_do_not_matter() -> None:
    base = compute_topic_hash(TOPIC_ID, "orders", RACKS)
    reversed_racks = {p: list(reversed(r)) for p, r in RACKS.items()}
    reordered_partitions = dict(reversed(list(RACKS.items())))
    duplicated = {p: r + r[:1] + [None] for p, r in RACKS.items()}
    assert compute_topic_hash(TOPIC_ID, "orders", reversed_racks) == base
    assert compute_topic_hash(TOPIC_ID, "orders", reordered_partitions) == base
    assert compute_topic_hash(TOPIC_ID, "orders", duplicated) == base


@pytest.mark.parametrize("changed", [
    dict(topic_id=OTHER_ID),
    dict(name="orders2"),
    dict(partition_racks={**RACKS, 3: ["rack-a"]}),                    # a new partition
    dict(partition_racks={p: r for p, r in RACKS.items() if p != 2}),   # one fewer
    dict(partition_racks={**RACKS, 1: ["rack-b", "rack-d"]}),          # a rack changed
    dict(partition_racks={**RACKS, 1: ["rack-b"]}),                    # a rack left
    dict(partition_racks={0: RACKS[1], 1: RACKS[0], 2: RACKS[2]}),     # racks swapped partitions
])
def test_any_relevant_change_changes_the_topic_hash(changed: dict) -> None:
    args = dict(topic_id=TOPIC_ID, name="orders", partition_racks=RACKS)
    assert compute_topic_hash(**{**args, **changed}) != compute_topic_hash(**args)


def test_group_hash_seed_example_swapped_topic_hashes_differ() -> None:
    a, b = compute_topic_hash(TOPIC_ID, "topicA", RACKS), compute_topic_hash(OTHER_ID, "topicB", RACKS)
    before = compute_group_metadata_hash({"topicA": a, "topicB": b})
    after = compute_group_metadata_hash({"topicA": b, "topicB": a})
    assert before != after
    # A plain sum would not see the swap; the position weights do (hash(a + 2b) vs hash(b + 2a)).
    assert before == mmh3.hash64(struct.pack("<q", _long(a + 2 * b)), seed=0, signed=True)[0]


def test_group_hash_ignores_map_order_and_is_zero_without_topics() -> None:
    assert compute_group_metadata_hash({}) == 0
    assert (compute_group_metadata_hash({"b": 2, "a": 1, "c": 3})
            == compute_group_metadata_hash({"a": 1, "b": 2, "c": 3}))
    assert compute_group_metadata_hash({"a": 1}) != compute_group_metadata_hash({"0": 0, "a": 1})
    # The seed's weighted sum: a trailing topic hashing to 0 (one not in the image) adds nothing,
    # which is harmless since it has no partitions to assign.
    assert compute_group_metadata_hash({"a": 1}) == compute_group_metadata_hash({"a": 1, "b": 0})


def _long(v: int) -> int:
    v &= 2**64 - 1
    return v - 2**64 if v >> 63 else v


# --- cache ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class FakeTopic:
    topic_id: uuid.UUID
    name: str
    partitions: Mapping[int, tuple[int, ...]]


@dataclasses.dataclass(frozen=True)
class FakeRegistration:
    replicas: tuple[int, ...]


BROKER_RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: None}


def test_cache_computes_lazily_and_counts() -> None:
    calls: list[int] = []

    def rack_of(broker_id: int) -> str | None:
        calls.append(broker_id)
        return BROKER_RACKS.get(broker_id)

    cache = TopicHashCache(rack_of)
    topic = FakeTopic(TOPIC_ID, "orders", {0: (1, 2), 1: (2, 3), 2: (3, 1)})
    assert len(cache) == 0 and not calls                        # nothing before the first heartbeat
    value = cache.get("orders", topic)
    assert value == compute_topic_hash(TOPIC_ID, "orders", RACKS)
    assert (cache.hits, cache.misses) == (0, 1) and len(calls) == 6
    assert cache.get("orders", topic) == value
    assert (cache.hits, cache.misses) == (1, 1) and len(calls) == 6   # a hit reads no rack


def test_cache_accepts_partition_registrations_and_racks_of_unknown_brokers() -> None:
    cache = TopicHashCache(BROKER_RACKS.get)
    topic = FakeTopic(TOPIC_ID, "orders", {0: FakeRegistration((1, 2, 4, 9))})
    assert cache.get("orders", topic) == compute_topic_hash(TOPIC_ID, "orders", {0: ["rack-a", "rack-b"]})


def test_cache_invalidate_recomputes_from_the_new_image() -> None:
    cache = TopicHashCache(BROKER_RACKS.get)
    old = FakeTopic(TOPIC_ID, "orders", {0: (1, 2)})
    new = FakeTopic(TOPIC_ID, "orders", {0: (1, 2), 1: (2, 3)})
    first = cache.get("orders", old)
    assert cache.get("orders", new) == first                # stale until invalidated: by design
    cache.invalidate("orders")
    cache.invalidate("never-cached")                        # no error
    assert cache.get("orders", new) != first
    assert (cache.hits, cache.misses) == (1, 2)


def test_cache_missing_topic_is_zero_and_not_cached() -> None:
    cache = TopicHashCache(BROKER_RACKS.get)
    assert cache.get("gone", None) == 0
    assert "gone" not in cache and cache.misses == 1


def test_cache_retain_only_and_clear() -> None:
    cache = TopicHashCache(BROKER_RACKS.get)
    for i, name in enumerate(["a", "b", "c"]):
        cache.get(name, FakeTopic(uuid.UUID(int=i + 1), name, {0: (1,)}))
    cache.retain_only(["c", "a", "z"])
    assert "a" in cache and "b" not in cache and "c" in cache and len(cache) == 2
    cache.clear()
    assert len(cache) == 0


def test_group_hash_from_cache_changes_when_a_subscribed_topic_grows() -> None:
    cache = TopicHashCache(BROKER_RACKS.get)
    topics = {"a": FakeTopic(uuid.UUID(int=1), "a", {0: (1, 2)}),
              "b": FakeTopic(uuid.UUID(int=2), "b", {0: (2, 3)})}
    before = compute_group_metadata_hash({n: cache.get(n, t) for n, t in topics.items()})
    topics["b"] = FakeTopic(uuid.UUID(int=2), "b", {0: (2, 3), 1: (3, 1)})
    cache.invalidate("b")
    after = compute_group_metadata_hash({n: cache.get(n, t) for n, t in topics.items()})
    assert before != after
    leader_only = FakeTopic(uuid.UUID(int=2), "b", {0: (3, 2), 1: (1, 3)})   # replica order only
    cache.invalidate("b")
    assert compute_group_metadata_hash({"a": cache.get("a", topics["a"]), "b": cache.get("b", leader_only)}) == after
