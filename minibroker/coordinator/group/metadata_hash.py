"""KIP-1101: one int64 per subscribed topic, one int64 per group, instead of per-partition rack sets.

The group coordinator keeps a `TopicHashCache` shared by all groups and stores only
`compute_group_metadata_hash(...)` in `ConsumerGroupMetadataValue.MetadataHash`; a new value bumps
the group epoch.  A topic's hash covers exactly what can force a rebalance: topic id, name, the
number of partitions and each partition's racks.

Reading of the seed (it names the fields and their order, not a byte layout):
- Hash function: Murmur3, as the seed says, in the form Kafka's first implementation used, Guava's
  `Hashing.murmur3_128()` (seed 0, x64 128-bit variant) with `HashCode.asLong()`, i.e. the first
  64-bit half h1 read as a signed long.  That is `mmh3.hash64(data, seed=0, signed=True)[0]`
  (checked against Guava's known values in the tests).  Guava's streaming `Hasher` writes every
  `putLong`/`putInt` little-endian and `putString(s, UTF_8)` as the UTF-8 bytes with no length,
  so the topic's fields are concatenated that way and hashed once.
- Topic stream, in the seed's order:
    magic byte 0x00 (1 byte, the hash version)
    topic id: most significant long, then least significant long (Java `Uuid` halves; each LE)
    topic name: UTF-8
    partition count: long (8 bytes LE; the seed says "partition size (long)")
    for each partition, ascending id:  partition id: int (4 bytes LE),
                                       racks: long (8 bytes LE), see below
- Racks: the seed hashes "each value in it and sum[s] as a result" so that their order does not
  matter.  The racks of a partition are its replicas' racks as a set (replicas on brokers without a
  rack, or unknown brokers, add nothing); each rack is hashed alone (Murmur3 h1 of its UTF-8
  bytes), and the hashes are summed modulo 2^64 (Java long overflow), in sorted order.
- Group: topics sorted by name (Python's code-point order; Java's UTF-16 order differs only above
  U+FFFF, which Kafka topic names cannot contain); the seed's "hash(a + 2*b)": each topic hash
  multiplied by its 1-based position, summed modulo 2^64, and that long (8 bytes LE) hashed with
  Murmur3.  No topics give 0, which is also the tagged field's default.
Kafka's released code later moved to XXHash64 and then XXH3 with another rack encoding; this module
follows the seed, so its values are not comparable with a real Kafka coordinator's.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import mmh3

__all__ = [
    "TOPIC_HASH_MAGIC_BYTE",
    "TopicImageLike",
    "TopicHashCache",
    "compute_topic_hash",
    "compute_group_metadata_hash",
]

TOPIC_HASH_MAGIC_BYTE = 0x00

_MASK64 = (1 << 64) - 1
_LONG = struct.Struct("<q")
_INT = struct.Struct("<i")


def _murmur3_as_long(data: bytes) -> int:
    # Guava Hashing.murmur3_128().hashBytes(data).asLong()
    return mmh3.hash64(data, seed=0, x64arch=True, signed=True)[0]


def _to_long(value: int) -> int:
    value &= _MASK64
    return value - (1 << 64) if value >> 63 else value


def _uuid_bytes(topic_id: uuid.UUID | bytes) -> bytes:
    raw = topic_id.bytes if isinstance(topic_id, uuid.UUID) else bytes(topic_id)
    assert len(raw) == 16, f"topic id must be 16 bytes, got {len(raw)}"
    # Java writes getMostSignificantBits() then getLeastSignificantBits(), each putLong LE.
    return raw[7::-1] + raw[15:7:-1]


def _racks_hash(racks: Iterable[str | None]) -> int:
    total = 0
    for rack in sorted({r for r in racks if r is not None}):
        total += _murmur3_as_long(rack.encode("utf-8"))
    return _to_long(total)


def compute_topic_hash(topic_id: uuid.UUID | bytes, name: str,
                       partition_racks: Mapping[int, Iterable[str | None]]) -> int:
    """The topic's int64 hash over id, name, partition count and each partition's rack set.

    `partition_racks` maps partition id -> the racks of its replicas (order, duplicates and
    None are ignored).  `topic_id` is a `uuid.UUID` or its 16 big-endian bytes.
    """
    buf = bytearray()
    buf.append(TOPIC_HASH_MAGIC_BYTE)
    buf += _uuid_bytes(topic_id)
    buf += name.encode("utf-8")
    buf += _LONG.pack(len(partition_racks))
    for partition_id in sorted(partition_racks):
        buf += _INT.pack(partition_id)
        buf += _LONG.pack(_racks_hash(partition_racks[partition_id]))
    return _murmur3_as_long(bytes(buf))


def compute_group_metadata_hash(topic_hashes: Mapping[str, int]) -> int:
    """The group's MetadataHash: Murmur3 of sum(position * topic hash), topics by name; 0 if none."""
    if not topic_hashes:
        return 0
    total = 0
    for position, name in enumerate(sorted(topic_hashes), start=1):
        total += position * topic_hashes[name]
    return _murmur3_as_long(_LONG.pack(_to_long(total)))


class TopicImageLike(Protocol):
    """What the cache needs of a topic in the metadata image (duck type)."""

    topic_id: uuid.UUID | bytes
    name: str
    # partition id -> replica broker ids, or an object with `.replicas` (a PartitionRegistration).
    partitions: Mapping[int, Any]


def _replicas(partition: Any) -> Iterable[int]:
    replicas = getattr(partition, "replicas", None)
    return partition if replicas is None else replicas


class TopicHashCache:
    """Topic name -> topic hash, computed lazily on the first group heartbeat that needs it.

    `rack_of(broker_id) -> str | None` gives a registered broker's `broker.rack` (None for no rack
    or an unknown broker); it is read at computation time, so it should look at the current
    cluster image.  Owners call `invalidate(name)` for every topic a metadata delta changed or
    deleted, `clear()` when broker registrations (hence racks) changed, and
    `retain_only(names)` with the topics some group still subscribes to.
    """

    def __init__(self, rack_of: Callable[[int], str | None]) -> None:
        self._rack_of = rack_of
        self._hashes: dict[str, int] = {}
        self.hits = 0
        self.misses = 0

    def get(self, topic_name: str, topic_image: TopicImageLike | None) -> int:
        """The topic's hash, from the cache or computed now; 0 for a topic not in the image."""
        cached = self._hashes.get(topic_name)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        if topic_image is None:
            return 0        # like Kafka: a missing topic hashes to 0 and is not cached
        rack_of = self._rack_of
        partition_racks = {
            partition_id: [rack_of(broker_id) for broker_id in _replicas(partition)]
            for partition_id, partition in topic_image.partitions.items()
        }
        value = compute_topic_hash(topic_image.topic_id, topic_image.name, partition_racks)
        self._hashes[topic_name] = value
        return value

    def invalidate(self, topic_name: str) -> None:
        self._hashes.pop(topic_name, None)

    def retain_only(self, subscribed_names: Iterable[str]) -> None:
        keep = set(subscribed_names)
        for name in [n for n in self._hashes if n not in keep]:
            del self._hashes[name]

    def clear(self) -> None:
        self._hashes.clear()

    def __contains__(self, topic_name: object) -> bool:
        return topic_name in self._hashes

    def __len__(self) -> int:
        return len(self._hashes)
