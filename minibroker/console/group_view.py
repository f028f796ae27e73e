"""Consumer groups (classic and KIP-848), their lag over time, offset resets, and transactions.

Lag history: the console samples each group someone looked at in the last few minutes, once a
second, and keeps ten minutes of {partition: lag} per group for the chart; groups nobody looks
at cost nothing.
"""
from __future__ import annotations

import asyncio
import collections
import logging

import kafka.errors as Errors
from kafka.protocol.admin import (DescribeProducersRequest, DescribeTransactionsRequest,
                                  ListTransactionsRequest)
from kafka.protocol.consumer import OffsetFetchRequest

from minibroker.client.admin import Admin
from minibroker.client.records import TopicPartition
from minibroker.clock import Clock
from minibroker.console.kafka_view import ConsoleError, Missing, whole_number

log = logging.getLogger("minibroker.console")

HISTORY_SAMPLES = 600         # ten minutes at one sample a second
WATCH_SECONDS = 300           # a group is sampled this long after it was last looked at
COORDINATOR_MAX_AGE = 5.0     # s
GROUPS_MAX_AGE = 0.5          # s


class GroupView:
    def __init__(self, admin: Admin, clock: Clock | None = None) -> None:
        self.admin = admin
        self.clock = clock or Clock()
        self.history: dict[str, collections.deque] = {}
        self._watched: dict[str, float] = {}      # group -> loop time last looked at
        self._task: asyncio.Task | None = None
        self._by_partition = False                # OffsetFetch must name the partitions
        # FindCoordinator and ListGroups answers, reused for a moment: a group page and its
        # lag samples would otherwise ask them again every second.
        self._find = admin._coordinator
        self._coordinators: dict[str, tuple[float, int]] = {}
        admin._coordinator = self._cached_coordinator
        self._typed: tuple[float, dict] | None = None

    async def _cached_coordinator(self, group_id: str) -> int:
        now = asyncio.get_running_loop().time()
        hit = self._coordinators.get(group_id)
        if hit is None or now - hit[0] > COORDINATOR_MAX_AGE:
            hit = self._coordinators[group_id] = (now, await self._find(group_id))
        return hit[1]

    async def _list_typed(self) -> dict:
        now = asyncio.get_running_loop().time()
        if self._typed is None or now - self._typed[0] > GROUPS_MAX_AGE:
            self._typed = (now, await self.admin.list_groups_typed())
        return self._typed[1]

    # ------------------------------------------------------------------ listing and describing
    async def groups(self) -> dict:
        """{"groups": [...], "unsupported": why the brokers list none, or ""}."""
        try:
            typed = await self._list_typed()
        except Errors.UnsupportedVersionError:       # ListGroups < v5: no group type
            try:
                typed = {g: (pt, "", "classic")
                         for g, pt in (await self.admin.list_groups()).items()}
            except Errors.UnsupportedVersionError as e:
                return dict(groups=[], unsupported=str(e))
        return dict(unsupported="", groups=[
            dict(group_id=g, protocol_type=pt or "", state=state, type=gt or "classic")
            for g, (pt, state, gt) in sorted(typed.items())])

    async def group(self, group_id: str) -> dict:
        self.watch(group_id)
        kind = await self._kind(group_id)
        try:
            if kind == "consumer":
                d = (await self.admin.describe_consumer_groups([group_id]))[group_id]
            else:
                d = (await self.admin.describe_groups([group_id]))[group_id]
        except Errors.UnsupportedVersionError:          # librdkafka's mock cluster
            d = dict(state="unknown (DescribeGroups is not supported by the brokers)",
                     members=[])
        d.setdefault("group_epoch", None)
        d.setdefault("assignment_epoch", None)
        if d["state"] in ("Dead", "") and not d["members"]:
            offsets = await self.admin.list_group_offsets(group_id)
            if not offsets:
                raise Missing(f"no group {group_id!r} in the cluster")
        lag = await self.lag(group_id)
        members = [dict(m, assignment=sorted((t, sorted(ps)) for t, ps in m["assignment"].items()))
                   for m in d["members"]]
        owner = {(t, p): m["member_id"] for m in members for t, ps in m["assignment"] for p in ps}
        for row in lag:
            row["member_id"] = owner.get((row["topic"], row["partition"]), "")
        return dict(group_id=group_id, type=kind, state=d["state"],
                    group_epoch=d.get("group_epoch"), assignment_epoch=d.get("assignment_epoch"),
                    protocol=d.get("protocol") or d.get("assignor") or "", members=members,
                    lag=lag, total_lag=sum(r["lag"] for r in lag if r["lag"] is not None))

    async def _kind(self, group_id: str) -> str:
        try:
            typed = await self._list_typed()
        except Errors.UnsupportedVersionError:
            self._by_partition = True
            return "classic"
        return typed.get(group_id, ("", "", "classic"))[2] or "classic"

    async def lag(self, group_id: str) -> list[dict]:
        committed = await self.admin.list_group_offsets(group_id)
        if not committed and self._by_partition:
            committed = await self._committed_by_partition(group_id)
        tps = sorted(committed)
        ends = await self.admin.list_offsets({tp: "latest" for tp in tps}) if tps else {}
        rows = []
        for tp in tps:
            end = ends[tp][0] if tp in ends else None
            rows.append(dict(topic=tp.topic, partition=tp.partition, committed=committed[tp],
                             high_watermark=end,
                             lag=None if end is None else max(0, end - committed[tp])))
        return rows

    async def _committed_by_partition(self, group_id: str) -> dict[TopicPartition, int]:
        """OffsetFetch naming every partition: brokers that list no groups (librdkafka's mock)
        answer null to "all topics"."""
        await self.admin.metadata.fetch_all()
        T = OffsetFetchRequest.OffsetFetchRequestTopic
        topics = [T(name=n, partition_indexes=sorted(t.partitions))
                  for n, t in sorted(self.admin.metadata.topics.items()) if not t.is_internal]
        if not topics:
            return {}
        node = await self.admin._coordinator(group_id)
        resp = await self.admin.pool.request(node, OffsetFetchRequest(
            group_id=group_id, topics=topics, require_stable=False), lo=1, hi=7)
        return {TopicPartition(t.name, p.partition_index): p.committed_offset
                for t in resp.topics or () for p in t.partitions
                if not p.error_code and p.committed_offset >= 0}

    # ------------------------------------------------------------------ lag over time
    def watch(self, group_id: str) -> None:
        self._watched[group_id] = asyncio.get_running_loop().time()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._sample_loop())

    def chart(self, group_id: str) -> dict:
        """{"t": [unix seconds], "series": {"topic-p": [lag]}, "total": [lag]} for uPlot."""
        self.watch(group_id)
        samples = list(self.history.get(group_id, ()))
        names = sorted({k for _, lags in samples for k in lags})
        return dict(t=[t for t, _ in samples],
                    series={n: [lags.get(n) for _, lags in samples] for n in names},
                    total=[sum(v for v in lags.values() if v is not None) for _, lags in samples])

    async def _sample_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while self._watched:
            started = loop.time()
            for g in sorted(self._watched):
                if started - self._watched[g] > WATCH_SECONDS:
                    del self._watched[g]
                    continue
                try:
                    rows = await self.lag(g)
                except Exception as e:  # noqa: BLE001 - a sample missed; the next one may work
                    log.debug("lag sample of %s failed: %r", g, e)
                    continue
                h = self.history.setdefault(g, collections.deque(maxlen=HISTORY_SAMPLES))
                h.append((self.clock.now_ms() / 1000, {f"{r['topic']}-{r['partition']}": r["lag"]
                                                       for r in rows}))
            await asyncio.sleep(max(0.05, 1.0 - (loop.time() - started)))

    async def close(self) -> None:
        self._watched.clear()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass

    # ------------------------------------------------------------------ offset reset
    async def reset_offsets(self, group_id: str, topic: str, strategy: str, value: str,
                            apply: bool) -> list[dict]:
        """Kafka's --reset-offsets: the new offset of each partition; committed only if
        `apply` (the group must be empty, as for kafka-consumer-groups.sh --execute)."""
        committed = await self.admin.list_group_offsets(group_id)
        if topic.strip():
            await self.admin.metadata.refresh([topic.strip()])
            md = self.admin.metadata.topic(topic.strip())
            if md is None or md.error_code:
                raise ConsoleError(f"no topic {topic.strip()!r} in the cluster")
            tps = [TopicPartition(md.name, p) for p in sorted(md.partitions)]
        else:
            tps = sorted(committed)
        if not tps:
            raise ConsoleError(f"group {group_id!r} has no committed offsets; name a topic")
        targets = await self._targets(tps, committed, strategy, value)
        if apply:
            try:
                await self.admin.alter_group_offsets(group_id, targets)
            except Errors.KafkaError as e:
                raise ConsoleError(f"could not reset {group_id}: {type(e).__name__} "
                                   "(the group must have no active members)") from None
        return [dict(topic=tp.topic, partition=tp.partition, current=committed.get(tp),
                     new=targets[tp]) for tp in tps]

    async def _targets(self, tps, committed, strategy: str, value: str) -> dict:
        if strategy in ("earliest", "latest"):
            found = await self.admin.list_offsets({tp: strategy for tp in tps})
            return {tp: found[tp][0] for tp in tps}
        if strategy == "offset":
            off = whole_number(value, "offset")
            return {tp: off for tp in tps}
        if strategy == "timestamp":
            ts = whole_number(value, "timestamp (ms)")
            found = await self.admin.list_offsets({tp: ts for tp in tps})
            ends = await self.admin.list_offsets({tp: "latest" for tp in tps})
            return {tp: found[tp][0] if found[tp][0] >= 0 else ends[tp][0] for tp in tps}
        if strategy == "shift":
            by = whole_number(value, "shift")
            starts = await self.admin.list_offsets({tp: "earliest" for tp in tps})
            ends = await self.admin.list_offsets({tp: "latest" for tp in tps})
            return {tp: min(ends[tp][0], max(starts[tp][0], committed.get(tp, ends[tp][0]) + by))
                    for tp in tps}
        raise ConsoleError(f"unknown reset strategy {strategy!r}: "
                           "earliest, latest, offset, timestamp or shift")

    # ------------------------------------------------------------------ transactions
    async def transactions(self, topic: str = "") -> dict:
        await self.admin.metadata.fetch_all()
        listed: dict[int, list[str]] = {}
        for node in sorted(self.admin.metadata.brokers):
            try:
                resp = await self.admin.pool.request(node, ListTransactionsRequest(
                    state_filters=[], producer_id_filters=[], duration_filter=-1), hi=1)
            except Errors.UnsupportedVersionError:
                return dict(supported=False, transactions=[], producers=[])
            listed[node] = sorted(s.transactional_id for s in resp.transaction_states)
        now_ms = self.clock.now_ms()
        txns = []
        for node, ids in sorted(listed.items()):
            if not ids:
                continue
            resp = await self.admin.pool.request(node, DescribeTransactionsRequest(
                transactional_ids=ids))
            for s in resp.transaction_states:
                if s.error_code:
                    continue
                age = now_ms - s.transaction_start_time_ms \
                    if s.transaction_start_time_ms >= 0 else None
                txns.append(dict(
                    transactional_id=s.transactional_id, coordinator=node,
                    state=s.transaction_state, producer_id=s.producer_id,
                    producer_epoch=s.producer_epoch, timeout_ms=s.transaction_timeout_ms,
                    start_time_ms=s.transaction_start_time_ms, age_ms=age,
                    hanging=s.transaction_state == "Ongoing" and age is not None
                    and age > s.transaction_timeout_ms,
                    tps=sorted((t.topic, p) for t in s.topics for p in t.partitions)))
        for t in txns:
            t["partitions"] = [f"{topic}-{p}" for topic, p in t["tps"]]
        tps = {tp for t in txns if t["state"] == "Ongoing" for tp in t["tps"]}
        if topic.strip():
            md = self.admin.metadata.topic(topic.strip())
            if md is None:
                raise Missing(f"no topic {topic.strip()!r} in the cluster")
            tps |= {(md.name, p) for p in md.partitions}
        if tps:            # their leaders now: the shared metadata may predate a new topic
            await self.admin.metadata.refresh(sorted({t for t, _ in tps}))
        producers = await self._producers(sorted(tps))
        return dict(supported=True, transactions=txns, producers=producers,
                    ongoing=sum(t["state"] == "Ongoing" for t in txns),
                    hanging=sum(t["hanging"] for t in txns))

    async def _producers(self, tps: list[tuple[str, int]]) -> list[dict]:
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, p in tps:
            leader = self.admin.metadata.leader(topic, p)
            if leader >= 0:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(p)
        out = []
        for node, topics in sorted(by_leader.items()):
            try:
                resp = await self.admin.pool.request(node, DescribeProducersRequest(topics=[
                    DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps)
                    for t, ps in sorted(topics.items())]))
            except Errors.UnsupportedVersionError:
                return []
            for t in resp.topics:
                for p in t.partitions:
                    for s in p.active_producers:
                        out.append(dict(topic=t.name, partition=p.partition_index,
                                        producer_id=s.producer_id,
                                        producer_epoch=s.producer_epoch,
                                        last_sequence=s.last_sequence,
                                        last_timestamp=s.last_timestamp,
                                        txn_start_offset=s.current_txn_start_offset))
        return sorted(out, key=lambda r: (r["topic"], r["partition"], r["producer_id"]))

