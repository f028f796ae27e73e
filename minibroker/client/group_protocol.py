"""The classic 'consumer' group protocol: subscription/assignment bytes and the leader's assignors.

ConsumerProtocolSubscription v0: version int16, topics [string], user_data bytes.
ConsumerProtocolAssignment v0:   version int16, [topic string, [partition int32]], user_data bytes.
(Later versions append fields; a v0 reader ignores them, as Kafka's does.)

Assignors (run by the group leader on the members' subscriptions, members sorted by member id):
- ``range``: per topic, partitions split into contiguous ranges, the first members getting one more.
- ``roundrobin``: every subscribed (topic, partition) in order dealt to the members in turn,
  skipping members not subscribed to that topic.
KIP-253 part 6: `split_assign` runs an assignor separately on the undeleted partitions and on the
partitions marked for deletion, so the partitions that still receive data are spread evenly.
"""
from __future__ import annotations

import struct
from typing import Callable, Mapping

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def _string(s: str) -> bytes:
    b = s.encode()
    return _H.pack(len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    return _I.pack(-1) if b is None else _I.pack(len(b)) + b


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def int16(self) -> int:
        (v,) = _H.unpack_from(self.data, self.pos)
        self.pos += 2
        return v

    def int32(self) -> int:
        (v,) = _I.unpack_from(self.data, self.pos)
        self.pos += 4
        return v

    def string(self) -> str:
        n = self.int16()
        s = bytes(self.data[self.pos:self.pos + n]).decode()
        self.pos += n
        return s

    def bytes_(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            return None
        b = bytes(self.data[self.pos:self.pos + n])
        self.pos += n
        return b

    def at_end(self) -> bool:
        return self.pos >= len(self.data)


def encode_subscription(topics, user_data: bytes | None = None) -> bytes:
    topics = sorted(topics)
    return _H.pack(0) + _I.pack(len(topics)) + b"".join(_string(t) for t in topics) + \
        _bytes(user_data)


def decode_subscription(data: bytes) -> tuple[list[str], bytes | None]:
    r = _Reader(data)
    r.int16()
    topics = [r.string() for _ in range(r.int32())]
    user_data = r.bytes_() if not r.at_end() else None
    return topics, user_data


def encode_assignment(assignment: Mapping[str, list[int]], user_data: bytes | None = None) -> bytes:
    out = [_H.pack(0), _I.pack(len(assignment))]
    for topic in sorted(assignment):
        parts = sorted(assignment[topic])
        out.append(_string(topic) + _I.pack(len(parts)) + b"".join(_I.pack(p) for p in parts))
    out.append(_bytes(user_data))
    return b"".join(out)


def decode_assignment(data: bytes | None) -> dict[str, list[int]]:
    if not data:
        return {}
    r = _Reader(data)
    r.int16()
    out: dict[str, list[int]] = {}
    for _ in range(r.int32()):
        topic = r.string()
        out[topic] = [r.int32() for _ in range(r.int32())]
    return out


Assignor = Callable[[dict[str, list[str]], dict[str, int]], dict[str, dict[str, list[int]]]]


def range_assign(subscriptions: dict[str, list[str]], partition_counts: dict[str, int],
                 ) -> dict[str, dict[str, list[int]]]:
    """subscriptions: member id -> topics; partition_counts: topic -> count."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for topic in sorted(partition_counts):
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        if not members:
            continue
        n = partition_counts[topic]
        per, extra = divmod(n, len(members))
        start = 0
        for i, m in enumerate(members):
            k = per + (1 if i < extra else 0)
            if k:
                out[m][topic] = list(range(start, start + k))
            start += k
    return out


def roundrobin_assign(subscriptions: dict[str, list[str]], partition_counts: dict[str, int],
                      ) -> dict[str, dict[str, list[int]]]:
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    members = sorted(subscriptions)
    i = 0
    for topic in sorted(partition_counts):
        for p in range(partition_counts[topic]):
            for _ in range(len(members)):
                m = members[i % len(members)]
                i += 1
                if topic in subscriptions[m]:
                    out[m].setdefault(topic, []).append(p)
                    break
    return out


def split_assign(assignor: Assignor, subscriptions: dict[str, list[str]],
                 partitions: dict[str, tuple[list[int], list[int]]]
                 ) -> dict[str, dict[str, list[int]]]:
    """partitions: topic -> (undeleted partitions, partitions marked for deletion); the assignor
    deals each list on its own (its positions mapped back to the partition ids)."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in subscriptions}
    for which in (0, 1):
        lists = {t: ps[which] for t, ps in partitions.items() if ps[which]}
        result = assignor(subscriptions, {t: len(ps) for t, ps in lists.items()})
        for m, topics in result.items():
            for t, idx in topics.items():
                out[m].setdefault(t, []).extend(lists[t][i] for i in idx)
    for m in out:
        for t in out[m]:
            out[m][t].sort()
    return out


ASSIGNORS: dict[str, Assignor] = {"range": range_assign, "roundrobin": roundrobin_assign}
