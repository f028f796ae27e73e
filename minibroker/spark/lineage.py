"""Which incarnation of a topic-partition a streaming query's checkpointed offset belongs to.

Partitions disappear: KIP-253 removes drained partitions marked for deletion, and topics are
deleted. A later expansion may create a partition with the same number, or a topic with the same
name: a new lineage, whose offsets say nothing about the old one's. As Kafka decides it, the
number does not: the topic id does (a topic created again gets a new one), and the leader epoch
does (a partition number created again starts one leader epoch above its last incarnation's, so
OffsetForLeaderEpoch of an epoch the query saw answers, as for a truncated log (KIP-320), an end
below the offset the query reached).

The micro-batch offsets Spark checkpoints are Kafka-style JSON ({"topic": {"0": 5}}) with three
more keys no topic can have ('@' is not a legal topic name character):
- "@leaderEpochs": {"topic": {"0": 7}}: per partition, the leader epoch ListOffsets answered with
  its latest offset (>= the epoch of every record below it);
- "@closed": {"topic": [10, 11]}: partitions gone at the last planning: their offsets are kept,
  nothing is listed or read for them;
- "@topicIds": {"topic": "uuid"}.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from minibroker.client import TopicPartition
from minibroker.spark import _kafka

log = logging.getLogger("minibroker.spark.lineage")

EPOCHS, CLOSED, TOPIC_IDS = "@leaderEpochs", "@closed", "@topicIds"


@dataclass
class Lineage:
    epochs: dict[TopicPartition, int] = field(default_factory=dict)
    closed: set[TopicPartition] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: dict | None) -> "Lineage":
        d = d or {}
        return cls(
            epochs={TopicPartition(t, int(p)): int(e)
                    for t, ps in d.get(EPOCHS, {}).items() for p, e in ps.items()},
            closed={TopicPartition(t, int(p)) for t, ps in d.get(CLOSED, {}).items() for p in ps},
            topic_ids=dict(d.get(TOPIC_IDS, {})))

    def to_json(self) -> dict:
        out: dict = {}
        if self.epochs:
            ep: dict = {}
            for tp in sorted(self.epochs):
                ep.setdefault(tp.topic, {})[str(tp.partition)] = int(self.epochs[tp])
            out[EPOCHS] = ep
        if self.closed:
            cl: dict = {}
            for tp in sorted(self.closed):
                cl.setdefault(tp.topic, []).append(tp.partition)
            out[CLOSED] = cl
        if self.topic_ids:
            out[TOPIC_IDS] = dict(sorted(self.topic_ids.items()))
        return out


_LOOKUP_ERRORS = (_kafka.Errors.KafkaError, ConnectionError, OSError, TimeoutError, KeyError)


async def new_lineages(admin, topics: dict[str, _kafka.TopicInfo], start: dict[TopicPartition, int],
                       seen: Lineage, epochs: dict[TopicPartition, int]
                       ) -> tuple[set[TopicPartition], set[TopicPartition]]:
    """(partitions listed now whose checkpointed offset belongs to an earlier incarnation,
    partitions whose incarnation could not be told now: hold them closed this trigger).

    Looked at: a topic whose id changed (all its partitions), and a partition whose leader epoch
    rose since the last planning if it was gone then or may be removed (KIP-253: numbers >= the
    initial count). Other epoch rises (leader moves) need no lookup: such a partition cannot be
    created again while listed."""
    fresh: set[TopicPartition] = set()
    unknown: set[TopicPartition] = set()
    for tp in sorted(epochs):
        if tp not in start:
            continue
        info = topics[tp.topic]
        old_id = seen.topic_ids.get(tp.topic)
        if old_id and info.topic_id and old_id != info.topic_id:
            fresh.add(tp)
            continue
        seen_epoch = seen.epochs.get(tp, -1)
        now = epochs[tp]
        removable = tp in seen.closed or (info.counts is not None and tp.partition >= info.counts[0])
        if seen_epoch < 0 or now <= seen_epoch or not removable or start[tp] <= 0:
            continue
        try:
            end = await _kafka.end_of_epoch(admin, tp.topic, tp.partition, seen_epoch)
        except _LOOKUP_ERRORS as e:
            log.info("%s: OffsetForLeaderEpoch(%d) failed (%r): held", tp, seen_epoch, e)
            unknown.add(tp)
            continue
        if end < start[tp]:
            log.info("%s: epoch %d ends at %d below the checkpointed %d: a new incarnation",
                     tp, seen_epoch, end, start[tp])
            fresh.add(tp)
    return fresh, unknown
