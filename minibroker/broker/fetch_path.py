"""Fetch: reading the log for consumers and followers (Kafka's fetchMessages), with incremental
fetch sessions, the long poll, KIP-320 divergence and leader-side replication throttling. Part of
ReplicaManager (broker/replica_state.py says how the parts fit)."""
from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kafka.errors import OffsetOutOfRangeError

from minibroker.broker.fetch_session import (QUIET_REFRESH_MS, FetchSession, FollowerWaker,
                                             SessionPartition)
from minibroker.broker.first_fetch import WAKE
from minibroker.broker.partition import Partition
from minibroker.broker.replica_state import ReplicaState
from minibroker.log.batch import next_offset
from minibroker.protocol.fast import FetchPartition

# A partition without data carries empty records, never null: Kafka sends MemoryRecords.EMPTY, and
# librdkafka fails the whole response on a null ("invalid MessageSetSize -1") and fetches again at
# once, in a tight loop for as long as the error lasts.
NO_RECORDS = ()

# (topic, the request's partition or a SessionPartition, the Partition, 0 or the error code; the
# Partition is None only with an error)
PlanEntry = tuple[str, Any, Partition | None, int]
# a follower's session partition found idle: (its Partition, itself, the Partition's `changes`)
Idle = tuple[Partition, SessionPartition, int]


def fetch_error(index: int, code: int, high_watermark: int = -1,
                log_start_offset: int = -1) -> FetchPartition:
    return FetchPartition(index, code, high_watermark, -1, log_start_offset, NO_RECORDS)


def _end_of(records: Any) -> int:
    """The offset after the last of these stored batches (base offset + last offset delta + 1)."""
    return next_offset(records[-1])


def _idle(p: Partition, sp: SessionPartition, follower: bool, isolation_level: int) -> bool:
    """Nothing to read at a session partition's fetch offset, and its high watermark, last stable
    offset and log start offset are as the session last sent them. A follower also fetches at
    our latest epoch or none (an empty log): then its log cannot have diverged from ours."""
    plog = p.log
    if follower:
        if sp.fetch_offset != plog.log_end_offset:
            return False
        epoch = sp.last_fetched_epoch
        if epoch != -1 and epoch != plog.epochs.latest_epoch:
            return False
    hw = p.high_watermark
    # The LSO is the HW unless a transaction is open or undecided below it (inlined: a follower's
    # session visits every partition it shares with us twice per fetch).
    lso = p.last_stable_offset() if plog.producers.ongoing or plog.txn_index.unreplicated else hw
    if not follower and sp.fetch_offset != (lso if isolation_level else hw):
        return False
    sent = sp.sent
    return sent is not None and sent[0] == hw and sent[1] == lso \
        and sent[2] == plog.log_start_offset


def _mark_quiet(idle: Iterable[Idle], session: FetchSession, replica_id: int) -> None:
    """A follower's session partitions found idle (Partition, SessionPartition, its `changes`
    then) become quiet: skipped until their counter moves, their long poll registered with the
    session's waker, their follower caught up at each of the session's fetches meanwhile. Not
    one whose follower is out of the ISR: its fetches are what expands the ISR."""
    waker = session.waker
    for p, sp, seen in idle:
        f = p.followers.get(replica_id)
        if f is None or replica_id not in p.isr:
            continue
        sp.quiet, sp.quiet_partition, sp.quiet_follower = seen, p, f
        f.quiet_in = session
        p.add_data_waiter(waker, replica_id)


def _wake(fut: asyncio.Future[object]) -> None:
    if not fut.done():
        fut.set_result(None)


class FetchPath(ReplicaState):

    # ------------------------------------------------------------------ Fetch: reading the log
    async def fetch_records(self, items: Iterable[tuple[str, Any, int]], replica_id: int,
                            max_wait_ms: int, min_bytes: int, max_bytes: int,
                            isolation_level: int, incremental: bool = False,
                            session: FetchSession | None = None
                            ) -> dict[str, list[FetchPartition]]:
        """Read for a consumer (replica_id -1) or a follower (>= 0; its fetch offsets move the
        high watermark), Kafka's fetchMessages: `items` are (topic, FetchPartition of the request,
        undeleted partition count). Long-polls up to max_wait_ms until min_bytes are readable,
        woken by appends / HW moves. Returns protocol.fast FetchPartitions per topic.
        `incremental`: the items are an incremental fetch session's SessionPartitions; one with
        nothing to read and nothing new to say since the session's last answer is only waited
        on, not answered (the handler would drop its answer): a follower's session holds every
        partition it shares with us, and one write moves one of them.
        `session`: a follower's fetch session. Its partitions found idle are marked quiet and
        skipped by its next fetches (no visit, no bookkeeping: see fetch_session.py) until their
        `changes` counter or log start moves or the follower names them; once a second it visits
        them all. Their long polls stay registered with the session's FollowerWaker, and the ISR
        reads their caught-up time from the session (FollowerState.quiet_in)."""
        follower = replica_id >= 0
        now = self.clock.now_ms()
        marks = session if follower else None       # where idle partitions are marked quiet
        plan, quiet = self._plan(items, replica_id, now, marks, incremental)
        max_wait_ms = max(max_wait_ms, 0)
        min_bytes = min(min_bytes, max_bytes)
        if follower:
            max_wait_ms = self.first_fetches.max_wait_ms(replica_id, max_wait_ms)
        clock = self.clock
        deadline = clock.monotonic() + max_wait_ms / 1000
        while True:
            results, sizes, total, errors, waiters, idle = self._read(
                plan, replica_id, max_bytes, isolation_level, incremental, marks is not None)
            timeout = deadline - clock.monotonic()
            # A float remainder below the clock's resolution would re-arm a timer that never moves
            # the (virtual) clock: treat it as elapsed.
            if total >= min_bytes or errors or timeout <= 1e-6 or not (waiters or quiet) \
                    or not self.running:
                return self._answer(results, sizes, total, idle, marks, replica_id)
            woken_by, waker = await self._wait(waiters, replica_id, marks, timeout)
            if woken_by is WAKE:
                # We lead a new partition of this follower: let it fetch that too.
                return self._answer(results, sizes, total, idle, marks, replica_id)
            if quiet and marks is not None and waker is not None and waker.woken:
                quiet -= self._visit_woken(waker.woken, marks, plan, replica_id, now)

    def _plan(self, items: Iterable[tuple[str, Any, int]], replica_id: int, now: int,
              marks: FetchSession | None, incremental: bool) -> tuple[list[PlanEntry], int]:
        """Resolve the fetched partitions and record a follower's progress, once, before any
        waiting: [(topic, fetch partition, Partition, error)], and how many quiet partitions of a
        follower's session were skipped (waited on through the session's waker)."""
        follower = replica_id >= 0
        skip = marks is not None and incremental and now < marks.full_visit_ms
        if marks is not None and not skip:
            marks.full_visit_ms = now + QUIET_REFRESH_MS
        plan: list[PlanEntry] = []
        quiet = 0
        partitions, node_id = self.partitions, self.node_id
        for topic, fp, undeleted_partition_count in items:
            if skip and fp.quiet >= 0:
                qp = fp.quiet_partition
                if fp.quiet == qp.changes and qp.log.log_start_offset == fp.sent[2]:
                    quiet += 1      # nothing to say of it, and the follower has it all
                    continue
                fp.quiet = -1
            # leader_partition inlined for the common case (a follower's session visits every
            # partition it shares with us on each fetch); it still answers every other one.
            p = partitions.get((topic, fp.partition))
            epoch = fp.current_leader_epoch
            if p is not None and p.leader == node_id and (epoch < 0 or epoch == p.leader_epoch):
                err = 0
            else:
                p, err = self.leader_partition(topic, fp.partition, epoch)
            if p is not None and not err and not follower:
                err = self.check_partition_metadata(p, undeleted_partition_count, producing=False)
            if p is not None and not err and follower:
                p.update_follower_fetch(replica_id, fp.fetch_offset, now)
            plan.append((topic, fp, p, err))
        if marks is not None:
            marks.quiet_fetch_ms = now      # the skipped partitions' follower was caught up now
        return plan, quiet

    def _read(self, plan: list[PlanEntry], replica_id: int, max_bytes: int,
              isolation_level: int, incremental: bool, marking: bool
              ) -> tuple[dict[str, list[FetchPartition]], dict[str, int], int, bool,
                         list[Partition], list[Idle]]:
        """One pass over the plan: (FetchPartitions per topic, bytes read per topic, bytes read in
        all, whether any partition answered an error, the partitions to wait on, and the idle
        session partitions to mark quiet when `marking`)."""
        follower = replica_id >= 0
        leader_quota = self.throttle.leader
        results: dict[str, list[FetchPartition]] = {}
        sizes: dict[str, int] = {}      # bytes returned per topic, for the broker's counters
        total = 0
        errors = False
        remaining = max_bytes
        waiters: list[Partition] = []
        idle: list[Idle] = []
        for topic, fp, p, err in plan:
            if incremental and p is not None and not err and fp.sent is not None \
                    and _idle(p, fp, follower, isolation_level):
                waiters.append(p)
                if marking:
                    idle.append((p, fp, p.changes))
                continue
            out = results.setdefault(topic, [])
            if err or p is None:
                out.append(fetch_error(fp.partition, err))
                errors = True
                continue
            plog = p.log
            div = self._diverging(p, fp.last_fetched_epoch, fp.fetch_offset) if follower else None
            if div is not None:
                out.append(FetchPartition(fp.partition, 0, p.high_watermark,
                                          p.last_stable_offset(), plog.log_start_offset,
                                          NO_RECORDS, div))
                errors = True
                continue
            max_offset = plog.log_end_offset if follower else (
                p.last_stable_offset() if isolation_level else p.high_watermark)
            if not plog.log_start_offset <= fp.fetch_offset <= plog.log_end_offset:
                out.append(fetch_error(fp.partition, OffsetOutOfRangeError.errno,
                                       p.high_watermark, plog.log_start_offset))
                errors = True
                continue
            records: Any = NO_RECORDS      # () or the stored batches read
            throttled = follower and leader_quota.rate is not None \
                and self.throttle.leader_throttled(p, replica_id)
            if throttled and leader_quota.exceeded():
                waiters.append(p)       # over the leader quota: no data now, as if none
            elif fp.fetch_offset < max_offset and remaining > 0:
                r = plog.read(fp.fetch_offset, min(fp.partition_max_bytes, remaining),
                              max_offset, min_one=(total == 0))
                if r.size:
                    records = r.records
                    total += r.size
                    remaining -= r.size
                    sizes[topic] = sizes.get(topic, 0) + r.size
                    if throttled:
                        leader_quota.record(r.size)
            else:
                waiters.append(p)
            if isolation_level and not follower:
                # read_committed: the aborted transactions with records in what was read
                # (clients drop those records); the read itself stopped at the LSO.
                aborted: list[Any] = plog.aborted_transactions(fp.fetch_offset, _end_of(records)) \
                    if records else []
                out.append(FetchPartition(fp.partition, 0, p.high_watermark, max_offset,
                                          plog.log_start_offset, records,
                                          aborted_transactions=aborted))
                continue
            out.append(FetchPartition(fp.partition, 0, p.high_watermark, p.last_stable_offset(),
                                      plog.log_start_offset, records))
        return results, sizes, total, errors, waiters, idle

    async def _wait(self, waiters: list[Partition], replica_id: int, marks: FetchSession | None,
                    timeout: float) -> tuple[object, FollowerWaker | None]:
        """Wait until a waited-on partition has data (or its high watermark moves), or `timeout`
        seconds: (what woke us, a follower's waker). One future for every partition: the first
        append / HW move resolves it and this task resumes in the next loop pass (no
        asyncio.wait hop); a timer ends the wait."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[object] = loop.create_future()      # None, or WAKE
        follower = replica_id >= 0
        waker = None
        if follower:
            waker = marks.waker if marks is not None else FollowerWaker()
            waker.fut = fut
            waker.woken = []
            for p in waiters:
                p.add_data_waiter(waker, replica_id)
            self.first_fetches.waiting(replica_id, fut)
        else:
            for p in waiters:
                p.add_data_waiter(fut)
        timer = loop.call_later(timeout, _wake, fut)
        try:
            return await fut, waker
        finally:
            timer.cancel()
            if not fut.done():
                fut.cancel()
            if waker is not None:
                if waker.fut is fut:
                    waker.fut = None
                self.first_fetches.done_waiting(replica_id, fut)

    def _answer(self, results: dict[str, list[FetchPartition]], sizes: dict[str, int], total: int,
                idle: list[Idle], marks: FetchSession | None, replica_id: int
                ) -> dict[str, list[FetchPartition]]:
        """Count the bytes going out and mark the idle session partitions quiet: the answer."""
        if total:
            self._count_bytes_out(replica_id >= 0, sizes)
        if idle and marks is not None:      # idle partitions are found only with `marks`
            _mark_quiet(idle, marks, replica_id)
        return results

    def _visit_woken(self, woken: list[Partition], session: FetchSession, plan: list[PlanEntry],
                     replica_id: int, now: int) -> int:
        """A parked follower fetch woken by partitions it skipped as quiet visits them now, as
        if it had not skipped them (fetch_records' plan). Returns how many."""
        n = 0
        for q in woken:
            sp = session.partitions.get((q.topic, q.partition))
            if sp is None or sp.quiet < 0:
                continue            # visited already (or since forgotten)
            sp.quiet = -1
            n += 1
            p, err = self.leader_partition(q.topic, q.partition, sp.current_leader_epoch)
            if p is not None:
                p.update_follower_fetch(replica_id, sp.fetch_offset, now)
            plan.append((q.topic, sp, p, err))
        return n

    def _count_bytes_out(self, follower: bool, sizes: dict[str, int]) -> None:
        """Kafka's BytesOut (consumers, per topic) and ReplicationBytesOut (followers)."""
        if follower:
            self.stats.replication_bytes_out += sum(sizes.values())
            return
        for topic, n in sizes.items():
            self.stats.topics[topic].bytes_out += n

    @staticmethod
    def _diverging(p: Partition, last_fetched_epoch: int, fetch_offset: int
                   ) -> tuple[int, int] | None:
        """KIP-320: where a follower's log diverged from ours, as (epoch, end offset), or None."""
        if last_fetched_epoch < 0:
            return None
        epoch, end_offset = p.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return (epoch, end_offset)
        return None
