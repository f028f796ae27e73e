"""Per-key order and loss checker over a full produced and delivered history (KIP-253 scenarios).

Produced: every record a producer got an acknowledgement for, as (key, seq, partition, offset);
each key belongs to one producer, which numbers the key's records 0, 1, 2, ... in send order.
Delivered: every record any group member's poll() returned, in the global order the application
saw them (one list, appended as polls return; all members share one event loop).

Delivery is at least once (a partition's new owner restarts from the committed offset), so the
check is on *first* deliveries: when a key's record `seq` is delivered for the first time, every
acknowledged record of that key with a smaller seq must already have been delivered.  Anything
else is an order violation (the application would apply a newer state before an older one).
A loss is an acknowledged record never delivered.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Report:
    records: int = 0                 # acknowledged records
    keys: int = 0
    delivered: int = 0               # deliveries, duplicates included
    duplicates: int = 0
    violations: int = 0
    losses: int = 0
    expansions: int = 0
    deletions: int = 0
    examples: list = field(default_factory=list)

    def summary(self) -> str:
        return (f"records={self.records} keys={self.keys} delivered={self.delivered} "
                f"duplicates={self.duplicates} violations={self.violations} losses={self.losses} "
                f"expansions={self.expansions} deletions={self.deletions}")


class History:
    def __init__(self) -> None:
        self.produced: list[tuple[bytes, int, int, int]] = []
        self.delivered: list[tuple[str, bytes, int, int, int]] = []   # member, key, seq, p, offset
        self.expansions = 0
        self.deletions = 0

    def ack(self, key: bytes, seq: int, partition: int, offset: int) -> None:
        self.produced.append((key, seq, partition, offset))

    def deliver(self, member: str, key: bytes, seq: int, partition: int, offset: int) -> None:
        self.delivered.append((member, key, seq, partition, offset))

    def check(self, max_examples: int = 5) -> Report:
        r = Report(expansions=self.expansions, deletions=self.deletions)
        acked: dict[bytes, set[int]] = defaultdict(set)
        for key, seq, _, _ in self.produced:
            acked[key].add(seq)
        r.records = sum(len(s) for s in acked.values())
        r.keys = len(acked)
        seen: dict[bytes, set[int]] = defaultdict(set)
        # smallest acknowledged seq of each key not yet delivered
        for key, seq_set in acked.items():
            seen[key] = set()
        next_missing = {key: 0 for key in acked}
        ordered = {key: sorted(s) for key, s in acked.items()}
        for member, key, seq, partition, offset in self.delivered:
            r.delivered += 1
            if seq in seen[key]:
                r.duplicates += 1
                continue
            seen[key].add(seq)
            want = ordered.get(key, [])
            i = next_missing.get(key, 0)
            # acknowledged seqs below `seq` not delivered yet
            while i < len(want) and want[i] in seen[key]:
                i += 1
            next_missing[key] = i
            if i < len(want) and want[i] < seq:
                r.violations += 1
                if len(r.examples) < max_examples:
                    r.examples.append(f"{member} delivered {key!r} seq {seq} (p{partition} "
                                      f"o{offset}) before seq {want[i]}")
        for key, seqs in acked.items():
            missing = seqs - seen[key]
            r.losses += len(missing)
            if missing and len(r.examples) < max_examples:
                r.examples.append(f"{key!r}: never delivered {sorted(missing)[:5]}")
        return r
