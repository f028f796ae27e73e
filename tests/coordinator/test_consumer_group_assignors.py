"""Server-side assignors: balance, stickiness, range's contiguity, rack awareness."""
from __future__ import annotations

import uuid

from minibroker.coordinator.group.assignors import (MemberSpec, TopicDescription, range_,
                                                    uniform)

A, B = uuid.UUID(int=1), uuid.UUID(int=2)
R3 = frozenset({"r1", "r2", "r3"})


def topics(n_a: int = 6, n_b: int = 0, racks=None):
    out = {"a": TopicDescription(A, "a", tuple(racks or [frozenset()] * n_a))}
    if n_b:
        out["b"] = TopicDescription(B, "b", (frozenset(),) * n_b)
    return out


def members(*ids, subs=("a",), rack=None, prev=None):
    return {m: MemberSpec(m, rack(m) if rack else None, frozenset(subs),
                          (prev or {}).get(m, {})) for m in ids}


def counts(result):
    return sorted(sum(len(p) for p in a.values()) for a in result.values())


def test_uniform_balances_and_is_sticky():
    r = uniform(members("m1", "m2", "m3"), topics(7))
    assert counts(r) == [2, 2, 3]
    assert sorted(p for a in r.values() for p in a[A]) == list(range(7))
    # Same input, previous assignment as target: nothing moves (KIP-1101's no-op bump).
    prev = {m: {A: frozenset(a[A])} for m, a in r.items()}
    assert uniform(members("m1", "m2", "m3", prev=prev), topics(7)) == r
    # A fourth member takes only what balance requires; others keep the rest.
    r4 = uniform(members("m1", "m2", "m3", "m4", prev=prev), topics(7))
    assert counts(r4) == [1, 2, 2, 2]
    for m in ("m1", "m2", "m3"):
        assert r4[m][A] <= r[m][A]


def test_uniform_heterogeneous_subscriptions():
    ms = {"m1": MemberSpec("m1", None, frozenset({"a"})),
          "m2": MemberSpec("m2", None, frozenset({"a", "b"}))}
    r = uniform(ms, topics(2, 2))
    assert B not in r["m1"] and r["m2"][B] == {0, 1}
    assert sorted(p for a in r.values() for p in a.get(A, ())) == [0, 1]


def test_range_gives_contiguous_ranges_by_member_id():
    r = range_(members("m2", "m1", "m3"), topics(7))
    assert (r["m1"][A], r["m2"][A], r["m3"][A]) == ({0, 1, 2}, {3, 4}, {5, 6})


def test_rack_aware_prefers_members_in_the_replica_racks():
    racks = [frozenset({"r1"}), frozenset({"r2"}), frozenset({"r3"})] * 2
    r = uniform(members("m1", "m2", "m3", rack=lambda m: "r" + m[1]), topics(racks=racks))
    assert (r["m1"][A], r["m2"][A], r["m3"][A]) == ({0, 3}, {1, 4}, {2, 5})
    # r3's broker restarts in r9: m3's rack matches nothing, but balance still holds and the
    # matched members keep their partitions.
    racks9 = [frozenset({"r1"}), frozenset({"r2"}), frozenset({"r9"})] * 2
    prev = {m: {A: frozenset(a[A])} for m, a in r.items()}
    r9 = uniform(members("m1", "m2", "m3", rack=lambda m: "r" + m[1], prev=prev),
                 topics(racks=racks9))
    assert counts(r9) == [2, 2, 2] and r9["m1"][A] == {0, 3} and r9["m2"][A] == {1, 4}
    # Without racks on members: not rack-aware, plain balance.
    assert counts(uniform(members("m1", "m2"), topics(racks=racks))) == [3, 3]
