"""KIP-253 linear hashing against PROTOCOL.md ("KIP-253 arithmetic") and Kafka's murmur2."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from minibroker.partitioning import (
    ancestors,
    blocking_on_deletion,
    blocking_parent_on_expansion,
    key_hash,
    key_moves,
    murmur2,
    parent,
    partition_for_hash,
    partition_for_key,
    partition_for_unkeyed,
)

# Kafka's UtilsTest.testMurmur2 (and librdkafka's rdmurmur2.c for b"kafka"): Java's signed ints.
MURMUR2_JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"kafka", -798503068),
    # Akka's Murmur2Spec, taken from Kafka's Utils.murmur2.
    (b"1", -1993445489),
    (b"12", 126087238),
    (b"123", -267702483),
    (b"1234", -1614185708),
    (b"12345", -1188365604),
]


@pytest.mark.parametrize("data,expected", MURMUR2_JAVA_VECTORS)
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected
    assert key_hash(data) == expected & 0x7FFFFFFF


def test_murmur2_accepts_bytearray_and_memoryview() -> None:
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


# --- hand-computed arithmetic -----------------------------------------------------------------
# N=3.  U=4: base 3, S=1, so p=0 splits by h%6 into {0,3}.  U=5: S=2.  U=6: h%6.  U=7..11: base 6,
# S=U-6.  U=12: h%12.

@pytest.mark.parametrize("h,expected", [
    #        U = 3  4  5  6  7  8  9  10 11 12
    (0,      [0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
    (6,      [0, 0, 0, 0, 6, 6, 6, 6, 6, 6]),    # 6%3=0 -> 6%6=0 ; from U=7 0 splits: 6%12=6
    (9,      [0, 3, 3, 3, 3, 3, 3, 9, 9, 9]),    # 9%6=3 from U=4; 3 splits at U=10 (S=4 > 3)
    (7,      [1, 1, 1, 1, 1, 7, 7, 7, 7, 7]),    # 1 splits at U=5 (7%6=1, stays) and U=8 (7%12=7)
    (23,     [2, 2, 2, 5, 5, 5, 5, 5, 5, 11]),   # 23%6=5 from U=6; 5 splits at U=12 (23%12=11)
    (4,      [1, 1, 4, 4, 4, 4, 4, 4, 4, 4]),    # 1 splits at U=5: 4%6=4; 4 splits at U=11: 4%12=4
    (10,     [1, 1, 4, 4, 4, 4, 4, 4, 10, 10]),  # 4 splits at U=11: 10%12=10
])
def test_n3_u3_to_12(h: int, expected: list[int]) -> None:
    assert [partition_for_hash(h, 3, u) for u in range(3, 13)] == expected


@pytest.mark.parametrize("h,expected", [
    #        U = 1  2  3  4  5  6  8  9  13
    (12,     [0, 0, 0, 0, 4, 4, 4, 4, 12]),
    (7,      [0, 1, 1, 3, 3, 3, 7, 7, 7]),
    (0,      [0, 0, 0, 0, 0, 0, 0, 0, 0]),
])
def test_n1(h: int, expected: list[int]) -> None:
    assert [partition_for_hash(h, 1, u) for u in (1, 2, 3, 4, 5, 6, 8, 9, 13)] == expected


@pytest.mark.parametrize("h,expected", [
    #        U = 4  5  8  7  6  5  9
    (20,     [0, 4, 4, 4, 4, 4, 4]),
    (13,     [1, 1, 5, 5, 5, 1, 5]),
    (3,      [3, 3, 3, 3, 3, 3, 3]),
    (15,     [3, 3, 7, 3, 3, 3, 7]),    # 7 deleted at U=7: back to its parent 3
])
def test_n4_grow_and_shrink(h: int, expected: list[int]) -> None:
    assert [partition_for_hash(h, 4, u) for u in (4, 5, 8, 7, 6, 5, 9)] == expected


def test_parent_and_ancestors() -> None:
    assert [parent(p, 4) for p in range(4)] == [None] * 4
    assert [parent(p, 4) for p in range(4, 17)] == [0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 0]
    assert parent(10, 3) == 4 and ancestors(10, 3) == [4, 1]
    assert ancestors(13, 4) == [5, 1]
    assert ancestors(7, 1) == [3, 1, 0]
    assert parent(0, 1) is None and ancestors(0, 1) == []
    assert blocking_parent_on_expansion(7, 4) == 3
    assert blocking_parent_on_expansion(6, 1) == 2
    with pytest.raises(AssertionError):
        blocking_parent_on_expansion(2, 4)


def test_blocking_on_deletion_examples() -> None:
    # N=1, 6 -> 3: 3 -> 1, 4 -> 0, 5 -> 1.
    assert [blocking_on_deletion(s, 1, 6, 3) for s in range(3)] == [[4], [3, 5], []]
    # N=4, 8 -> 7 and 8 -> 5: each deleted partition goes to its parent.
    assert [blocking_on_deletion(s, 4, 8, 7) for s in range(7)] == [[], [], [], [7], [], [], []]
    assert [blocking_on_deletion(s, 4, 8, 5) for s in range(5)] == [[], [5], [6], [7], []]
    # 9 -> 5 with N=4: 8 -> 0 (its parent, already < 5), 5,6,7 -> 1,2,3.
    assert blocking_on_deletion(0, 4, 9, 5) == [8]
    # N=1 down to one partition: everything drains into 0.
    assert blocking_on_deletion(0, 1, 64, 1) == list(range(1, 64))
    # Nothing deleted.
    assert blocking_on_deletion(2, 3, 7, 7) == []


def test_unkeyed_round_robin_over_undeleted() -> None:
    assert [partition_for_unkeyed(c, 4, 6) for c in range(8)] == [0, 1, 2, 3, 4, 5, 0, 1]


def test_key_moves() -> None:
    assert key_moves(13, 4, 5, 8) == (1, 5)
    assert key_moves(13, 4, 8, 5) == (5, 1)


# --- properties -------------------------------------------------------------------------------

hashes = st.integers(min_value=0, max_value=0x7FFFFFFF)


@st.composite
def counts(draw, max_n: int = 16, max_u: int = 300) -> tuple[int, int]:
    n = draw(st.integers(min_value=1, max_value=max_n))
    u = draw(st.integers(min_value=n, max_value=max(n, max_u)))
    return n, u


@given(hashes, counts())
def test_partition_in_range(h: int, nu: tuple[int, int]) -> None:
    n, u = nu
    assert 0 <= partition_for_hash(h, n, u) < u


@given(hashes, counts())
def test_grow_by_one_only_splits_parent(h: int, nu: tuple[int, int]) -> None:
    n, u = nu
    before, after = key_moves(h, n, u, u + 1)
    # (a) a key either stays or goes from parent(U) to the new partition U.
    assert after == before or (after == u and before == parent(u, n))


@given(hashes, counts(), st.integers(min_value=0, max_value=300))
def test_grow_moves_keys_only_down_the_tree(h: int, nu: tuple[int, int], extra: int) -> None:
    n, u = nu
    for u_to in (2 * u, u + extra):
        before, after = key_moves(h, n, u, u_to)
        # (b) any growth, U -> 2U included: a moved key lands in a new partition descending from
        # its old one, so no key moves between two partitions that exist before and after.
        if after != before:
            assert after >= u
            assert before in ancestors(after, n)


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_unchanged_count_is_kafkas_default_partitioner(key: bytes, n: int) -> None:
    # (d) U == N: exactly Kafka's murmur2(key) & 0x7fffffff % N.
    assert partition_for_key(key, n, n) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % n


@given(hashes, counts(), st.data())
def test_shrink_moves_only_deleted_keys_to_their_blocked_survivor(h: int, nu: tuple[int, int],
                                                                   data: st.DataObject) -> None:
    n, old_u = nu
    new_u = data.draw(st.integers(min_value=n, max_value=old_u))
    before, after = key_moves(h, n, old_u, new_u)
    # (e) keys of surviving partitions stay; keys of a deleted one go to a survivor blocked on it.
    if before < new_u:
        assert after == before
    else:
        assert before in blocking_on_deletion(after, n, old_u, new_u)
        assert after in ancestors(before, n)


@settings(max_examples=50)
@given(counts(max_n=8, max_u=120), st.data())
def test_blocking_sets_partition_the_deleted_range(nu: tuple[int, int], data: st.DataObject) -> None:
    n, old_u = nu
    new_u = data.draw(st.integers(min_value=n, max_value=old_u))
    sets = [blocking_on_deletion(s, n, old_u, new_u) for s in range(new_u)]
    flat = sorted(p for s in sets for p in s)
    assert flat == list(range(new_u, old_u))       # every deleted partition blocks exactly one survivor
    assert max(map(len, sets)) < 2 * -(-old_u // new_u)


@given(counts())
def test_expansion_blocks_on_exactly_the_split_parent(nu: tuple[int, int]) -> None:
    n, u = nu
    new = u   # growing U -> U+1 creates partition U
    if new >= n:
        p = blocking_parent_on_expansion(new, n)
        assert p < u and p == partition_for_hash(new, n, u)   # U itself hashes to its parent before
