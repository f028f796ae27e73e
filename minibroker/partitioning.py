"""KIP-253 linear hashing: which partition a key goes to while a topic grows and shrinks.

Pure arithmetic shared by the producer, the consumer's ordering barrier, the controller and tests
(CONTRACTS.md, "Protocol notes"):

    h = murmur2(key) & 0x7fffffff                      (Kafka's default partitioner hash)
    N = initial_partition_count, U = undeleted_partition_count
    L = the largest integer with N·2^L <= U,  S = U - N·2^L
    partition = h mod N·2^L;  if partition < S: partition = h mod N·2^(L+1)

Growing U by one splits exactly one partition, parent(U), into itself and U; keys never move
between two partitions that exist before and after.  Shrinking sends the keys of each deleted
partition to its first ancestor below the new count.  When U == N the result equals Kafka's
`murmur2(key) & 0x7fffffff % N`, so a topic that never changed its count partitions like Kafka.
"""
from __future__ import annotations

from kafka.partitioner.default import murmur2 as _murmur2_unsigned

__all__ = [
    "murmur2",
    "key_hash",
    "partition_for_hash",
    "partition_for_key",
    "partition_for_unkeyed",
    "parent",
    "ancestors",
    "blocking_parent_on_expansion",
    "blocking_on_deletion",
    "key_moves",
]


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (seed 0x9747b28c), as a signed 32-bit int like Java returns it.

    kafka-python's implementation is bit-for-bit Kafka's but returns the unsigned value;
    tests check it against the vectors of Kafka's UtilsTest.
    """
    h = _murmur2_unsigned(data)
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def key_hash(key: bytes) -> int:
    """The non-negative hash the default partitioner takes modulo the partition count."""
    return _murmur2_unsigned(key) & 0x7FFF_FFFF


def _check_counts(initial_count: int, undeleted_count: int) -> None:
    assert initial_count >= 1, f"initial_partition_count {initial_count} < 1"
    assert undeleted_count >= initial_count, (
        f"undeleted_partition_count {undeleted_count} < initial_partition_count {initial_count}")


def _level_base(p_or_u: int, initial_count: int) -> int:
    """N·2^L for the largest L with N·2^L <= p_or_u (p_or_u >= N)."""
    return initial_count << ((p_or_u // initial_count).bit_length() - 1)


def partition_for_hash(h: int, initial_count: int, undeleted_count: int) -> int:
    """Linear hashing of a non-negative hash over `undeleted_count` partitions; in [0, U)."""
    _check_counts(initial_count, undeleted_count)
    base = _level_base(undeleted_count, initial_count)      # N·2^L
    split = undeleted_count - base                           # S: partitions [0, S) already split
    p = h % base
    if p < split:
        p = h % (base << 1)
    return p


def partition_for_key(key: bytes, initial_count: int, undeleted_count: int) -> int:
    return partition_for_hash(key_hash(key), initial_count, undeleted_count)


def partition_for_unkeyed(counter: int, initial_count: int, undeleted_count: int) -> int:
    """Round-robin over the U undeleted partitions: `counter mod U`.

    Unkeyed records carry no per-key order, so they need not follow linear hashing; hashing a
    counter through it would give the S split partitions and their children half the share of
    the others.  Plain round-robin over [0, U) is even and never picks a partition marked for
    deletion.  `initial_count` is only checked, kept so every call site passes (N, U) alike.
    """
    _check_counts(initial_count, undeleted_count)
    return counter % undeleted_count


def parent(p: int, initial_count: int) -> int | None:
    """The partition that `p` was split from (p - N·2^L with N·2^L <= p < N·2^(L+1)); None for p < N."""
    assert p >= 0 and initial_count >= 1
    if p < initial_count:
        return None
    return p - _level_base(p, initial_count)


def ancestors(p: int, initial_count: int) -> list[int]:
    """parent(p), parent(parent(p)), ... down to a partition below N; nearest first."""
    out: list[int] = []
    q = parent(p, initial_count)
    while q is not None:
        out.append(q)
        q = parent(q, initial_count)
    return out


def blocking_parent_on_expansion(p: int, initial_count: int) -> int:
    """The one partition a new partition `p` must wait for: all keys of p came from parent(p)."""
    q = parent(p, initial_count)
    assert q is not None, f"partition {p} < initial_partition_count {initial_count} was never created by expansion"
    return q


def blocking_on_deletion(survivor: int, initial_count: int, old_undeleted_count: int,
                         new_undeleted_count: int) -> list[int]:
    """The partitions in [new_U, old_U) whose keys move into `survivor` when U shrinks, ascending.

    A deleted partition P sends its keys to its first ancestor below new_U, so `survivor` is
    blocked by every deleted P whose first ancestor below new_U is `survivor`: its descendants
    in the deleted range, reached without passing another survivor.  That is at most one
    partition when new_U and old_U - 1 lie in one level (N·2^L <= new_U < old_U <= N·2^(L+1)),
    and fewer than 2·ceil(old_U / new_U) in general (checked exhaustively for N <= 6,
    U < 200), within the seed's O(log n) for any shrink by a bounded factor.
    """
    _check_counts(initial_count, new_undeleted_count)
    assert old_undeleted_count >= new_undeleted_count
    assert 0 <= survivor < new_undeleted_count
    # Walk the survivor's subtree instead of scanning [new_U, old_U): children of q are
    # q + N·2^j for every j with N·2^j > q (q < N: every j >= 0).
    out: list[int] = []
    stack = [survivor]
    while stack:
        q = stack.pop()
        step = initial_count if q < initial_count else _level_base(q, initial_count) << 1
        while q + step < old_undeleted_count:
            child = q + step
            if child >= new_undeleted_count:     # a surviving child keeps its own subtree
                out.append(child)
                stack.append(child)
            step <<= 1
    out.sort()
    return out


def key_moves(h: int, initial_count: int, undeleted_from: int, undeleted_to: int) -> tuple[int, int]:
    """(partition before, partition after) for hash `h` when U changes from one count to another."""
    return (partition_for_hash(h, initial_count, undeleted_from),
            partition_for_hash(h, initial_count, undeleted_to))
