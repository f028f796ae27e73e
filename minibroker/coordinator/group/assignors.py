"""Server-side assignors of KIP-848 consumer groups: `uniform` (the default) and `range`.

Both are pure functions of the members (subscriptions, racks, previous target assignment) and the
subscribed topics (id, partition count, each partition's replica racks), as Kafka's
`ConsumerGroupPartitionAssignor.assign(GroupSpec, SubscribedTopicDescriber)`. They are sticky: a
member keeps the partitions of its previous target assignment that are still valid, up to its
quota, so a bump without a real change (KIP-1101's upgrade bump) gives the same assignment.

Rack-aware mode (Kafka's rule): on when some member's rack equals some subscribed partition's
replica rack. Then a partition is preferably given to a member in one of its replicas' racks, and
a member keeps a previous partition only if it is rack-matched or no subscribed member is in any
of that partition's racks (so a broker that restarts in another rack moves partitions).

- uniform: balances all subscribed partitions over the members. Homogeneous subscriptions: each
  member gets P//M or P//M+1 partitions; the +1s go to the members that retain most (sticky).
  Heterogeneous subscriptions: partitions with the fewest eligible members first, each to the
  eligible member with the fewest partitions (then rack match, then its previous owner).
- range: per topic, the members subscribed to it sorted by member id; the first P%M get one more;
  previous partitions are retained within the quota, the rest go in ascending order to the first
  member under its quota (contiguous ranges on a fresh group), rack-matched members first.

Decisions: member order is member-id order (deterministic, no hash()). The output maps member id ->
{topic id -> set of partitions}, with every member present (possibly empty).
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["TopicDescription", "MemberSpec", "ASSIGNORS", "DEFAULT_ASSIGNOR", "assign"]

Assignment = dict[uuid.UUID, set[int]]


@dataclass(frozen=True)
class TopicDescription:
    topic_id: uuid.UUID
    name: str
    partition_racks: tuple[frozenset[str], ...]     # index: partition id

    @property
    def num_partitions(self) -> int:
        return len(self.partition_racks)


@dataclass(frozen=True)
class MemberSpec:
    member_id: str
    rack_id: str | None
    subscribed_topics: frozenset[str]               # resolved names (regex included)
    assigned: Mapping[uuid.UUID, frozenset[int]] = field(default_factory=dict)  # previous target


TP = tuple[str, int]


def _rack_aware(members: Mapping[str, MemberSpec], topics: Mapping[str, TopicDescription]) -> bool:
    member_racks = {m.rack_id for m in members.values() if m.rack_id}
    if not member_racks:
        return False
    return any(racks & member_racks for t in topics.values() for racks in t.partition_racks)


class _State:
    def __init__(self, members: Mapping[str, MemberSpec],
                 topics: Mapping[str, TopicDescription]) -> None:
        self.members = members
        self.topics = topics
        self.rack_aware = _rack_aware(members, topics)
        self.by_id = {t.topic_id: t for t in topics.values()}
        self.result: dict[str, set[TP]] = {m: set() for m in members}

    def racks(self, tp: TP) -> frozenset[str]:
        return self.topics[tp[0]].partition_racks[tp[1]]

    def rack_match(self, mid: str, tp: TP) -> bool:
        return self.rack_aware and self.members[mid].rack_id in self.racks(tp)

    def previous(self, mid: str) -> list[TP]:
        """The member's previous partitions that still exist and that it still subscribes to."""
        m = self.members[mid]
        out = []
        for tid, parts in m.assigned.items():
            t = self.by_id.get(tid)
            if t is None or t.name not in m.subscribed_topics:
                continue
            out += [(t.name, p) for p in parts if 0 <= p < t.num_partitions]
        return sorted(out)

    def may_retain(self, mid: str, tp: TP, eligible: list[str]) -> bool:
        if not self.rack_aware or self.rack_match(mid, tp):
            return True
        racks = self.racks(tp)
        return not any(self.members[o].rack_id in racks for o in eligible)

    def output(self) -> dict[str, Assignment]:
        out: dict[str, Assignment] = {}
        for mid in sorted(self.result):
            a: Assignment = {}
            for name, p in sorted(self.result[mid]):
                a.setdefault(self.topics[name].topic_id, set()).add(p)
            out[mid] = a
        return out


def _subscribers(members: Mapping[str, MemberSpec], topic: str) -> list[str]:
    return sorted(mid for mid, m in members.items() if topic in m.subscribed_topics)


def uniform(members: Mapping[str, MemberSpec],
            topics: Mapping[str, TopicDescription]) -> dict[str, Assignment]:
    s = _State(members, topics)
    mids = sorted(members)
    if not mids:
        return {}
    subscribed = {name: _subscribers(members, name) for name in sorted(topics)}
    partitions = [(name, p) for name, subs in subscribed.items() if subs
                  for p in range(topics[name].num_partitions)]
    homogeneous = len({frozenset(members[m].subscribed_topics & topics.keys()) for m in mids}) == 1
    if not homogeneous:
        return _uniform_heterogeneous(s, partitions, subscribed)
    q, extra = divmod(len(partitions), len(mids))
    retained = {m: [tp for tp in s.previous(m) if s.may_retain(m, tp, mids)] for m in mids}
    order = sorted(mids, key=lambda m: (-len(retained[m]), m))
    quota = {m: q + (1 if i < extra else 0) for i, m in enumerate(order)}
    taken: set[TP] = set()
    for m in mids:
        keep = retained[m][:quota[m]]
        s.result[m].update(keep)
        taken.update(keep)
    free = [tp for tp in partitions if tp not in taken]
    if s.rack_aware:
        rest = []
        for tp in free:
            cands = [m for m in mids if len(s.result[m]) < quota[m] and s.rack_match(m, tp)]
            if cands:
                s.result[min(cands, key=lambda m: (len(s.result[m]), m))].add(tp)
            else:
                rest.append(tp)
        free = rest
    for tp in free:
        cands = [m for m in mids if len(s.result[m]) < quota[m]]
        assert cands, "uniform: quotas must cover every partition"
        s.result[min(cands, key=lambda m: (len(s.result[m]), m))].add(tp)
    return s.output()


def _uniform_heterogeneous(s: _State, partitions: list[TP],
                           subscribed: dict[str, list[str]]) -> dict[str, Assignment]:
    prev_owner: dict[TP, str] = {}
    for m in sorted(s.members):
        for tp in s.previous(m):
            prev_owner.setdefault(tp, m)
    for tp in sorted(partitions, key=lambda tp: (len(subscribed[tp[0]]), tp)):
        cands = subscribed[tp[0]]
        best = min(cands, key=lambda m: (len(s.result[m]), not s.rack_match(m, tp),
                                         prev_owner.get(tp) != m, m))
        s.result[best].add(tp)
    return s.output()


def range_(members: Mapping[str, MemberSpec],
           topics: Mapping[str, TopicDescription]) -> dict[str, Assignment]:
    s = _State(members, topics)
    previous = {m: s.previous(m) for m in members}
    for name in sorted(topics):
        subs = _subscribers(members, name)
        if not subs:
            continue
        n = topics[name].num_partitions
        q, extra = divmod(n, len(subs))
        quota = {m: q + (1 if i < extra else 0) for i, m in enumerate(subs)}
        count = {m: 0 for m in subs}
        taken: set[int] = set()
        for m in subs:
            for tp in previous[m]:
                if tp[0] == name and count[m] < quota[m] and s.may_retain(m, tp, subs):
                    s.result[m].add(tp)
                    count[m] += 1
                    taken.add(tp[1])
        for p in range(n):
            if p in taken:
                continue
            tp = (name, p)
            under = [m for m in subs if count[m] < quota[m]]
            matched = [m for m in under if s.rack_match(m, tp)]
            m = (matched or under)[0]
            s.result[m].add(tp)
            count[m] += 1
    return s.output()


ASSIGNORS = {"uniform": uniform, "range": range_}
DEFAULT_ASSIGNOR = "uniform"          # the first of group.consumer.assignors


def assign(name: str, members: Mapping[str, MemberSpec],
           topics: Mapping[str, TopicDescription]) -> dict[str, Assignment]:
    return ASSIGNORS[name](members, topics)
