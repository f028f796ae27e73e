"""What must hold after every step of a minibroker.testing.Simulation, whatever the faults.

Each check returns a list of violations (strings); the simulation raises on the first non-empty
list with its seed and step, so a failing run can be replayed from the seed.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from minibroker.cluster import Cluster


@dataclass(frozen=True)
class Acked:
    """One record a producer saw acknowledged with acks=all."""
    key: bytes
    seq: int                # the key's records are numbered 0, 1, 2, ... in send order
    partition: int
    offset: int
    value: bytes


def replica_logs(cluster: Cluster, topic: str) -> list[str]:
    """HWM <= LEO on every live replica of `topic`."""
    out = []
    for bid, b in sorted(cluster.brokers.items()):
        if not b.running:
            continue
        for (t, p), part in sorted(b.replica_manager.partitions.items()):
            if t == topic and not part.removed and part.high_watermark > part.log.log_end_offset:
                out.append(f"broker {bid} {t}-{p}: high watermark {part.high_watermark} > "
                           f"log end offset {part.log.log_end_offset}")
    return out


@dataclass
class LeaderHistory:
    """One leader per partition and leader epoch, now and over the whole run."""
    seen: dict[tuple[str, int, int], int] = field(default_factory=dict)

    def check(self, cluster: Cluster, topic: str) -> list[str]:
        out = []
        now: dict[tuple[str, int, int], list[int]] = collections.defaultdict(list)
        for bid, b in sorted(cluster.brokers.items()):
            if not b.running:
                continue
            for (t, p), part in sorted(b.replica_manager.partitions.items()):
                if t == topic and not part.removed and part.is_leader:
                    now[(t, p, part.leader_epoch)].append(bid)
        for (t, p, epoch), leaders in sorted(now.items()):
            if len(leaders) > 1:
                out.append(f"{t}-{p} leader epoch {epoch}: brokers {leaders} all lead it")
            first = self.seen.setdefault((t, p, epoch), leaders[0])
            if first != leaders[0]:
                out.append(f"{t}-{p} leader epoch {epoch}: led by broker {first} earlier, "
                           f"now by broker {leaders[0]}")
        return out


def acked_on_leaders(cluster: Cluster, topic: str, acked: list[Acked]) -> list[str]:
    """Every acknowledged record is below the log end of its partition's current live leader,
    the one with the highest leader epoch (acks=all put it on every ISR member, and leaders are
    elected from the ISR; a leader cut off from the rest may not know it was replaced yet)."""
    newest: dict[int, tuple[int, int]] = {}       # partition -> (leader epoch, log end offset)
    for _, b in sorted(cluster.brokers.items()):
        if not b.running:
            continue
        for (t, p), part in b.replica_manager.partitions.items():
            if t == topic and not part.removed and part.is_leader:
                newest[p] = max(newest.get(p, (-1, 0)), (part.leader_epoch,
                                                         part.log.log_end_offset))
    leo = {p: end for p, (_, end) in newest.items()}
    out = []
    for a in acked:
        if a.partition in leo and a.offset >= leo[a.partition]:
            out.append(f"acked {topic}-{a.partition}@{a.offset} ({a.value!r}) is past its "
                       f"leader's log end offset {leo[a.partition]}")
    return out


def acked_readable(acked: list[Acked], read: dict[tuple[int, int], bytes]) -> list[str]:
    """After the run: every acknowledged (partition, offset, value) is read back as it was."""
    return [f"acked {a.partition}@{a.offset} {a.value!r} reads back as "
            f"{read.get((a.partition, a.offset))!r}"
            for a in acked if read.get((a.partition, a.offset)) != a.value]


@dataclass
class CommittedOffsets:
    """A group's committed offsets never move backwards unless reset (by the simulation)."""
    last: dict[tuple[str, int], int] = field(default_factory=dict)

    def check(self, committed: dict[tuple[str, int], int]) -> list[str]:
        out = []
        for tp, off in sorted(committed.items()):
            before = self.last.get(tp)
            if before is not None and off < before:
                out.append(f"committed offset of {tp[0]}-{tp[1]} moved back {before} -> {off}")
            self.last[tp] = off
        return out

    def reset(self, tp: tuple[str, int]) -> None:
        self.last.pop(tp, None)


def per_key_order(acked: list[Acked], delivered: list[tuple[bytes, int]]) -> list[str]:
    """KIP-253 per-key order in what consumers delivered (at least once, so on first deliveries):
    the first delivery of a key's record `seq` must come after the first delivery of every
    acknowledged record of that key with a smaller seq that is delivered at all."""
    acked_seqs = {(a.key, a.seq) for a in acked}
    first: dict[bytes, list[int]] = collections.defaultdict(list)
    seen: set[tuple[bytes, int]] = set()
    for key, seq in delivered:
        if (key, seq) not in seen:
            seen.add((key, seq))
            first[key].append(seq)
    out = []
    for key, seqs in sorted(first.items()):
        highest = -1
        for seq in seqs:
            if seq < highest and (key, seq) in acked_seqs:
                out.append(f"key {key!r}: record {seq} first delivered after record {highest}")
            highest = max(highest, seq)
    return out
