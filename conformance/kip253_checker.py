"""Per-key order and loss checker over a full produced and delivered history (KIP-253 scenarios).

Produced: every record a producer got an acknowledgement for, as (key, seq, partition, offset);
each key belongs to one producer, which numbers the key's records 0, 1, 2, ... in send order.
Delivered: every record any group member's poll() returned, in the global order the application
saw them (one list, appended as polls return; all members share one event loop).

Delivery is at least once (a partition's new owner restarts from the committed offset), so the
check is on *first* deliveries: the first delivery of a key's record `seq` is an order violation
when an acknowledged record of that key with a smaller seq is first delivered after it (the
application would apply a newer state before an older one).  A loss is an acknowledged record
never delivered.  The check is minibroker.spark.checker's (pandas back-end; a Spark job for large
histories).
"""
from __future__ import annotations

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
        """minibroker.spark.checker's pandas back-end over this history (delivery order = the
        order deliveries were recorded); the same checker runs as a Spark job at scale."""
        import pandas as pd

        from minibroker.spark.checker import check_pandas
        produced = pd.DataFrame({"key": [k for k, _, _, _ in self.produced],
                                 "seq": [s for _, s, _, _ in self.produced]})
        delivered = pd.DataFrame({"key": [k for _, k, _, _, _ in self.delivered],
                                  "seq": [s for _, _, s, _, _ in self.delivered],
                                  "order": range(len(self.delivered))})
        r = check_pandas(produced, delivered, max_examples=max_examples)
        return Report(records=r.records, keys=r.keys, delivered=r.delivered,
                      duplicates=r.duplicates, violations=r.violations, losses=r.losses,
                      expansions=self.expansions, deletions=self.deletions, examples=r.examples)
