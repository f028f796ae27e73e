"""KIP-253 ordered delivery across micro-batches, planned in the streaming query's runner process.

A micro-batch covers [begin, end) of every topic-partition; `begin` is what earlier micro-batches
already delivered.  The seed's consumer rules (part 8) become caps on `end`, computed from the
broker's epochs (PartitionLeaderEpochsForPartitions, then OffsetForLeaderEpoch):

- expansion: a partition P1 >= N created by expansion, of which nothing was delivered yet (begin at
  its earliest offset), stays empty until its parent P3's begin has reached lowerOffsetThreshold+1
  (the end offset of leaderEpochAfterCreation[P3]).  Since begin counts only earlier micro-batches,
  every record of a key from before the split is in an *earlier* micro-batch than the key's first
  record in P1.
- deletion: a survivor P1 < U delivers only offsets below upperOffsetThreshold+1 (the end offset of
  leaderEpochBeforeDeletion[P1] of P3) while some partition P3 marked for deletion that blocks it
  (linear hashing) still has records not delivered in an earlier micro-batch.

So per key, records arrive in micro-batches in produce order and never in two partitions of the
same micro-batch; ordering the output by (micro-batch, partition, offset) gives per-key order.
A lookup that fails (a leader moving, metadata lagging) keeps that partition closed for this
trigger; the next trigger looks again.  Topics whose broker reports no KIP-253 counts (stock Kafka)
get no caps: Spark's own Kafka source never holds partitions back, and with Kafka's default
partitioner (hash mod count) keys move between *existing* partitions on expansion, so per-key
order is lost there anyway.
"""
from __future__ import annotations

import logging

import kafka.errors as Errors

from minibroker.client import TopicPartition
from minibroker.partitioning import blocking_on_deletion, parent
from minibroker.spark import _kafka

log = logging.getLogger("minibroker.spark.ordering")

_LOOKUP_ERRORS = (Errors.KafkaError, ConnectionError, OSError, TimeoutError, KeyError)


async def caps(admin, topics: dict[str, _kafka.TopicInfo], begin: dict[TopicPartition, int],
               earliest: dict[TopicPartition, int], latest: dict[TopicPartition, int]
               ) -> dict[TopicPartition, int]:
    """{tp: highest end offset KIP-253 allows this micro-batch} for partitions that are held."""
    out: dict[TopicPartition, int] = {}
    for name, info in sorted(topics.items()):
        if info.counts is None:
            continue
        n, u = info.counts
        parts = set(info.partitions)
        marked = sorted(p for p in parts if p >= u)
        young = [p for p in sorted(parts) if p >= n
                 and begin.get(TopicPartition(name, p), 0) <= earliest.get(TopicPartition(name, p), 0)]
        survivors = [p for p in sorted(parts) if p < u] if marked else []
        blockers = {p1: [p3 for p3 in blocking_on_deletion(p1, n, max(marked) + 1, u) if p3 in parts]
                    for p1 in survivors}
        wanted = sorted(set(young) | {p3 for b in blockers.values() for p3 in b})
        if not wanted:
            continue
        try:
            maps = await _kafka.leader_epoch_maps(admin, name, wanted)
        except _LOOKUP_ERRORS as e:
            log.info("%s: epochs unavailable (%r): holding partitions that may wait", name, e)
            for p in young + [p1 for p1, b in blockers.items() if b]:
                tp = TopicPartition(name, p)
                out[tp] = begin.get(tp, earliest.get(tp, 0))
            continue
        for p1 in young:
            tp1 = TopicPartition(name, p1)
            after, _ = maps.get(p1, ({}, {}))
            p3 = parent(p1, n)
            tp3 = TopicPartition(name, p3)
            if p3 not in after or tp3 not in begin and tp3 not in earliest:
                continue                      # not created by an expansion we know of / not read
            try:
                lower_end = await _kafka.end_of_epoch(admin, name, p3, after[p3])
            except _LOOKUP_ERRORS as e:
                log.info("%s: OffsetForLeaderEpoch(%s) failed (%r): holding it", tp1, tp3, e)
                out[tp1] = begin.get(tp1, earliest.get(tp1, 0))
                continue
            if lower_end > 0 and begin.get(tp3, earliest.get(tp3, 0)) < lower_end:
                out[tp1] = begin.get(tp1, earliest.get(tp1, 0))
        for p1, ps3 in blockers.items():
            tp1 = TopicPartition(name, p1)
            for p3 in ps3:
                tp3 = TopicPartition(name, p3)
                if begin.get(tp3, earliest.get(tp3, 0)) >= latest.get(tp3, 0):
                    continue                  # drained in earlier micro-batches
                _, before = maps.get(p3, ({}, {}))
                e = before.get(p1)
                try:
                    upper_end = 0 if e is None else max(0, await _kafka.end_of_epoch(admin, name, p1, e))
                except _LOOKUP_ERRORS as err:
                    log.info("%s: OffsetForLeaderEpoch failed (%r): holding it", tp1, err)
                    upper_end = 0
                b1 = begin.get(tp1, earliest.get(tp1, 0))
                out[tp1] = min(out.get(tp1, latest.get(tp1, 0)), max(b1, upper_end))
    return out
