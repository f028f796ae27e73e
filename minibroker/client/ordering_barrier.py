"""KIP-253's ordering barrier of the reference consumer (parts 7 and 8 of the seed).

One `OrderingBarrier` per Consumer. After a join it arms a `Barrier` per assigned partition of a
topic whose broker reports KIP-253 counts; each closes the partition (`gate` = 0) until its lookups
are done, then lets through only what ordering allows:
- Part 8, expansion: an assigned partition P1 >= N whose start (committed offset) is missing or
  equals its earliest offset delivers nothing until the group's position of P3 = parent(P1) has
  reached lowerOffsetThreshold + 1 (the end offset of leaderEpochAfterCreation[P3] of P1, by
  OffsetForLeaderEpoch); then `on_partition_key_assigned([P1])`.
- Part 8, deletion: a partition P1 below U delivers offset T only when, for every partition P3
  marked for deletion that blocks it (linear hashing), T <= upperOffsetThreshold (the last offset
  of leaderEpochBeforeDeletion[P1] of P3, by OffsetForLeaderEpoch) or the group's position of P3
  has reached P3's log end offset.
- Part 7: every heartbeat interval a ConsumerGroupPosition exchange asks the coordinator for the
  group's positions of the partitions barriers wait on and reports this member's positions of the
  partitions the coordinator asked for, when the seed's inclusion condition holds (first time;
  or grown and equal to the last high watermark; or the leader epoch of the last delivered record
  grew), after `on_partition_key_maybe_revoked` for them.

The consumer owns the partition states (`parts`: TopicPartition -> its state with `position`,
`committed`, `gate`, `high_watermark`, `last_epoch`, `reported`) and passes them in; the barrier
owns only what it looked up and what the coordinator told it.
"""
from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any, Mapping, Protocol

import kafka.errors as Errors

from minibroker.client.connection_pool import ConnectionPool
from minibroker.client.kip253 import (epoch_end_offset, kip253_counts, marked_for_deletion,
                                      partition_leader_epochs)
from minibroker.client.listeners import call_listener
from minibroker.client.list_offsets import EARLIEST, LATEST, list_offsets
from minibroker.client.metadata import ClusterMetadata
from minibroker.client.records import TopicPartition
from minibroker.partitioning import blocking_on_deletion
from minibroker.partitioning import parent as partition_parent
from minibroker.protocol.messages import (ConsumerGroupPositionRequest,
                                          ConsumerGroupPositionResponse)

log = logging.getLogger("minibroker.client.consumer")


class PartitionKeyRebalanceListener:
    """KIP-253's listener (methods may be sync or async)."""

    def on_partition_key_maybe_revoked(self, tps) -> None:
        """Flush state of keys received from `tps`: another member may soon take such keys."""

    def on_partition_key_assigned(self, tps) -> None:
        """Load state for new keys that may arrive from `tps`."""


class PartitionPosition(Protocol):
    """What the barrier reads and sets of the consumer's state of one assigned partition."""
    position: int | None
    committed: int | None
    high_watermark: int
    gate: int | None
    last_epoch: int
    reported: tuple[int, int] | None


class Barrier:
    """Part 8 for one assigned partition: what it waits for (None fields: not looked up yet)."""
    __slots__ = ("ready", "parent", "lower_end", "blockers", "opened")

    def __init__(self) -> None:
        self.ready = False            # lookups done
        self.parent: TopicPartition | None = None     # expansion: P3 and its end offset
        self.lower_end = -1
        self.blockers: dict[TopicPartition, tuple[int, int]] = {}   # deletion: P3 -> (upper end, LEO)
        self.opened = False           # on_partition_key_assigned called


class OrderingBarrier:
    def __init__(self, pool: ConnectionPool, metadata: ClusterMetadata, group_id: str | None,
                 retry_backoff: float) -> None:
        self.pool = pool
        self.metadata = metadata
        self.group_id = group_id
        self.retry_backoff = retry_backoff
        self.key_listener: Any = None
        self.barriers: dict[TopicPartition, Barrier] = {}
        self.retry_at = 0.0
        self.group_positions: dict[TopicPartition, int] = {}
        self.asked: set[TopicPartition] = set()   # the coordinator wants our position of these
        self.next_exchange = 0.0

    # ------------------------------------------------------------------ arming
    def reset(self) -> None:
        """Leaving the generation: the next join arms new barriers."""
        self.barriers = {}
        self.asked = set()

    def arm(self, parts: Mapping[TopicPartition, PartitionPosition]) -> None:
        """After a join: a closed barrier for every partition of a KIP-253 topic."""
        for tp, st in parts.items():
            md = self.metadata.topic(tp.topic)
            if md is not None and kip253_counts(md) is not None:
                self.barriers[tp] = Barrier()
                st.gate = 0                   # nothing delivered before the lookups

    def restart(self, tp: TopicPartition, st: PartitionPosition) -> None:
        """A position reset starts the partition without a usable committed offset; it may be a
        new partition at this index (the old one drained and deleted while we held it): look its
        barrier up again."""
        if tp in self.barriers:
            self.barriers[tp] = Barrier()
            st.gate = 0
            st.committed = None

    # ------------------------------------------------------------------ listener
    async def call_key_listener(self, name: str, tps) -> None:
        if tps:
            await call_listener(self.key_listener, name, tps)

    # ------------------------------------------------------------------ part 8
    def group_position(self, tp: TopicPartition,
                       parts: Mapping[TopicPartition, PartitionPosition]) -> int:
        pos = self.group_positions.get(tp, -1)
        st = parts.get(tp)
        if st is not None and st.position is not None and st.position > pos:
            pos = st.position
        return pos

    def wanted_positions(self) -> set[TopicPartition]:
        out = set()
        for b in self.barriers.values():
            if not b.ready or b.opened:
                continue
            if b.parent is not None:
                out.add(b.parent)
            out.update(b.blockers)
        return out

    async def prepare(self, now: float, parts: Mapping[TopicPartition, PartitionPosition]) -> bool:
        """Part 8 lookups for assigned partitions whose start position is known; True when
        lookups ran (the gates are then to be evaluated)."""
        if now < self.retry_at:
            return False
        todo = [(tp, b) for tp, b in self.barriers.items()
                if not b.ready and parts.get(tp) is not None and parts[tp].position is not None]
        if not todo:
            return False
        try:
            for tp, b in todo:
                await self._prepare_one(tp, b, parts[tp])
                if not self.barriers or self.barriers.get(tp) is not b:
                    return False             # rejoined meanwhile
        except (Errors.KafkaError, ConnectionError, asyncio.TimeoutError, OSError, KeyError) as e:
            log.debug("barrier lookups: %r", e)
            self.retry_at = now + self.retry_backoff
        return True

    async def _prepare_one(self, tp: TopicPartition, b: Barrier, st: PartitionPosition) -> None:
        md = self.metadata.topic(tp.topic)
        counts = kip253_counts(md) if md is not None else None
        if counts is None:
            b.ready = b.opened = True
            return
        n, u = counts
        marked = marked_for_deletion(md)
        timeout = self.pool.request_timeout
        parent = None
        if tp.partition >= n:
            start = st.committed
            if start is not None:
                earliest = (await list_offsets(self.pool, self.metadata, {tp: EARLIEST},
                                               timeout=timeout))[tp][0]
                latest = (await list_offsets(self.pool, self.metadata, {tp: LATEST},
                                             timeout=timeout))[tp][0]
                if not earliest <= start <= latest:
                    # Not an offset of this partition: committed for a partition of the same
                    # index that was drained and removed before this one was created.
                    start = None
            if start is None or start == earliest:
                after, _ = (await partition_leader_epochs(self.pool, tp.topic, [tp.partition]))[
                    tp.partition]
                p3 = partition_parent(tp.partition, n)
                if p3 in after:
                    lower_end = await epoch_end_offset(self.pool, self.metadata, tp.topic, p3,
                                                       after[p3])
                    if lower_end > 0:
                        parent = (TopicPartition(tp.topic, p3), lower_end)
        blockers: dict[TopicPartition, tuple[int, int]] = {}
        if marked and tp.partition < u:
            deleted = [p for p in blocking_on_deletion(tp.partition, n, max(marked) + 1, u)
                       if p in md.partitions]
            if deleted:
                maps = await partition_leader_epochs(self.pool, tp.topic, deleted)
                tps = [TopicPartition(tp.topic, p3) for p3 in deleted]
                leos = await list_offsets(self.pool, self.metadata, {t: LATEST for t in tps},
                                          timeout=timeout)
                for t in tps:
                    _, before = maps[t.partition]
                    e = before.get(tp.partition)
                    upper_end = 0 if e is None else \
                        await epoch_end_offset(self.pool, self.metadata, tp.topic, tp.partition, e)
                    blockers[t] = (max(upper_end, 0), leos[t][0])
        if self.barriers.get(tp) is not b:
            return                               # replaced (a reset) during the lookups
        if parent is not None:
            b.parent, b.lower_end = parent
        b.blockers = blockers
        b.ready = True
        if parent is None and not blockers:
            b.opened = True
            st.gate = None

    def evaluate(self, parts: Mapping[TopicPartition, PartitionPosition]) -> list[TopicPartition]:
        """Set each waiting partition's gate; returns the partitions that opened just now."""
        opened = []
        for tp, b in self.barriers.items():
            st = parts.get(tp)
            if st is None or not b.ready or b.opened:
                continue
            if b.parent is not None:
                if self.group_position(b.parent, parts) < b.lower_end:
                    st.gate = 0 if st.position is None else st.position
                    continue
                b.parent = None                   # passed for good: the parent's keys may arrive
            gate = None
            for p3, (upper_end, leo) in list(b.blockers.items()):
                if self.group_position(p3, parts) >= leo:
                    del b.blockers[p3]            # drained by the group
                else:
                    gate = upper_end if gate is None else min(gate, upper_end)
            st.gate = gate
            if gate is None:
                b.opened = True
                opened.append(tp)
        return opened

    # ------------------------------------------------------------------ part 7
    @staticmethod
    def _include_position(st: PartitionPosition) -> bool:
        """Part 7's inclusion condition for a partition the coordinator asked about."""
        if st.position is None:
            return False
        if st.reported is None:
            return True
        pos, epoch = st.reported
        return (st.position > pos and st.position == st.high_watermark) or st.last_epoch > epoch

    async def exchange_positions(self, node: int, generation_id: int, member_id: str,
                                 parts: Mapping[TopicPartition, PartitionPosition]) -> int:
        """One ConsumerGroupPosition round trip with the coordinator `node`; returns its error
        code. Connection failures raise (the caller drops the coordinator)."""
        wanted = self.wanted_positions()
        report = {tp: st for tp in sorted(self.asked)
                  if (st := parts.get(tp)) is not None and self._include_position(st)}
        if report:
            await self.call_key_listener("on_partition_key_maybe_revoked", list(report))
        entries: dict[str, dict[int, tuple[bool, int]]] = collections.defaultdict(dict)
        for tp in wanted:
            entries[tp.topic][tp.partition] = (True, -1)
        for tp, st in report.items():
            need, _ = entries[tp.topic].get(tp.partition, (False, -1))
            entries[tp.topic][tp.partition] = (need, st.position)
        R = ConsumerGroupPositionRequest
        RT = R.ConsumerGroupPositionRequestTopic
        req = R(group_id=self.group_id, generation_id=generation_id, member_id=member_id,
                topics=[RT(topic=t, partitions=[RT.ConsumerGroupPositionRequestPartition(
                    partition=p, need_position=need, position=pos)
                    for p, (need, pos) in sorted(entries[t].items())]) for t in sorted(entries)])
        conn = await self.pool.get(node)
        resp = await conn.request(req, 0, timeout=self.pool.request_timeout,
                                  response_class=ConsumerGroupPositionResponse)
        if resp.error_code:
            return resp.error_code
        for tp, st in report.items():
            st.reported = (st.position, st.last_epoch)
        asked = set()
        for t in resp.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                if p.need_position:
                    asked.add(tp)
                if p.position >= 0 and p.position > self.group_positions.get(tp, -1):
                    self.group_positions[tp] = p.position
        self.asked = asked
        return 0
