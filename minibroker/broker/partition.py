"""One partition replica on one broker: leader or follower state around a PartitionLog.

The leader tracks followers' log end offsets, advances the high watermark to the minimum over
the ISR, completes acks=all waiters, and asks the controller to shrink/expand the ISR
(AlterPartition). All state changes are plain synchronous methods; waiting is done on futures.
A Partition is given what it uses: its node id, clock, log, and how to ask for an ISR change
(the replica manager's request_isr_change); it knows nothing else of the broker.
"""
from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from kafka.errors import NotLeaderForPartitionError

from minibroker.clock import Clock
from minibroker.log.partition_log import PartitionLog


class QuietSession(Protocol):
    """A follower's fetch session as FollowerState reads it (broker/fetch_session.py)."""
    quiet_fetch_ms: int


class ReplicaWaker(Protocol):
    """A follower session's long poll, as a partition wakes it (broker/fetch_session.py)."""

    def wake(self, partition: Partition) -> None: ...


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_leo: int = -1
    # The fetch session that skips this partition as quiet (broker/fetch_session.py): the
    # follower was caught up at each of its fetches since, which are recorded there, not here.
    quiet_in: QuietSession | None = None

    def settle(self) -> None:
        """Write down what the quiet fetches left unrecorded: the last of them found the
        follower at our log end (a quiet partition is one it had reached)."""
        s = self.quiet_in
        if s is None:
            return
        self.quiet_in = None
        t = s.quiet_fetch_ms
        if t > self.last_fetch_ms:
            self.last_caught_up_ms = max(self.last_caught_up_ms, t)
            self.last_fetch_ms = t
            self.last_fetch_leader_leo = self.log_end_offset

    def caught_up_ms(self) -> int:
        s = self.quiet_in
        return self.last_caught_up_ms if s is None else max(self.last_caught_up_ms,
                                                            s.quiet_fetch_ms)


class Partition:
    def __init__(self, node_id: int, topic: str, topic_id: uuid.UUID, partition: int,
                 log: PartitionLog, clock: Clock,
                 request_isr_change: Callable[["Partition", tuple[int, ...]], None]) -> None:
        self.node_id = node_id
        self.clock = clock
        self._request_isr_change = request_isr_change
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.log = log
        self.log.high_watermark_of = lambda: self.high_watermark
        self.removed = False        # no longer hosted here (deleted, or its topic re-created)
        self.leader = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.high_watermark = 0
        self.followers: dict[int, FollowerState] = {}
        self.undeleted_partition_count = -1
        self.leader_epoch_after_creation: tuple[tuple[int, int], ...] = ()
        self.leader_epoch_before_deletion: tuple[tuple[int, int], ...] = ()
        self.isr_change_in_flight = False
        # The ISR asked of the controller (AlterPartition) and not yet confirmed by LeaderAndIsr.
        self.pending_isr: tuple[int, ...] = ()
        self.leader_epoch_start_offset = 0
        self._hw_waiters: list[tuple[int, asyncio.Future[int]]] = []
        self._data_waiters: list[asyncio.Future[object]] = []
        self._data_waiters_sweep = 16
        # Followers' long polls, by replica id: each follower's fetch session registers its
        # FollowerWaker (broker/fetch_session.py), woken by appends and role changes, not by a
        # HW move (below). It outlives a fetch: a partition the session finds quiet is not
        # visited by its next fetches, and still wakes them.
        self._replica_waiters: dict[int, ReplicaWaker] = {}
        # Moves with every change a follower's fetch session answers: appends, HW moves, role and
        # ISR changes, and all else that calls notify_data (retention, DeleteRecords). A quiet
        # partition is one whose counter has not moved since the session last found nothing to
        # say of it. Not counted: a log start moved by the log memory cap (sessions compare it).
        self.changes = 0

    # ------------------------------------------------------------------ role changes
    @property
    def is_leader(self) -> bool:
        return self.leader == self.node_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """Kafka's maximal ISR (KIP-497): the ISR plus replicas an in-flight AlterPartition adds.
        The controller may already count them in (and elect one of them) before our
        LeaderAndIsr arrives, so the high watermark must wait for them too."""
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    def make_leader(self, leader_epoch: int, partition_epoch: int, isr: Iterable[int],
                    replicas: Iterable[int]) -> None:
        now = self.clock.now_ms()
        new_term = leader_epoch != self.leader_epoch or not self.is_leader
        # The same state sent again (e.g. to every replica when a broker registers) does not
        # answer our in-flight AlterPartition; only a newer partition epoch does.
        changed = new_term or partition_epoch != self.partition_epoch
        self.leader = self.node_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr = tuple(isr)
        self.replicas = tuple(replicas)
        self.changes += 1
        if new_term:
            self.log.epochs.assign(leader_epoch, self.log.log_end_offset)
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.followers = {r: FollowerState(last_caught_up_ms=now if r in self.isr else 0)
                              for r in self.replicas if r != self.node_id}
        else:
            for r in self.replicas:
                if r != self.node_id and r not in self.followers:
                    self.followers[r] = FollowerState()
        if changed:
            self.isr_change_in_flight = False
            self.pending_isr = ()
        self.maybe_increment_high_watermark()

    def make_follower(self, leader: int, leader_epoch: int, partition_epoch: int,
                      isr: Iterable[int], replicas: Iterable[int]) -> None:
        was_leader = self.is_leader
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.isr = tuple(isr)
        self.replicas = tuple(replicas)
        self.followers = {}
        self.isr_change_in_flight = False
        self.pending_isr = ()
        if was_leader:
            self.fail_waiters(NotLeaderForPartitionError.errno)
        self.notify_data()

    # ------------------------------------------------------------------ high watermark
    def maybe_increment_high_watermark(self) -> bool:
        # Runs on every produce: the properties (is_leader, maximal_isr) are spelled out here.
        node_id = self.node_id
        if self.leader != node_id:
            return False
        hw = self.log.log_end_offset
        for r in (self.maximal_isr if self.pending_isr else self.isr):
            if r != node_id:
                f = self.followers.get(r)
                leo = f.log_end_offset if f is not None else -1
                if leo < hw:
                    hw = leo
        if hw > self.high_watermark:
            self.high_watermark = hw
            self.changes += 1
            if self._hw_waiters:
                self._complete_hw_waiters()
            self.log.memory.high_watermark_moved()
            # Consumers read up to the HW, so its move is data for them. A follower's parked fetch
            # is not woken: it reads to the log end, which did not move (Kafka's DelayedFetch for a
            # follower counts bytes past its fetch offset alone), and it learns the HW with its next
            # fetch. Woken, the first follower of an RF 3 write answered an empty fetch and fetched
            # again on every acks=all produce: 3 Fetch answers per write instead of 2.
            if self._data_waiters:
                self._wake(self._data_waiters)
                self._data_waiters = []
            return True
        return False

    def update_follower_hw(self, leader_hw: int) -> None:
        hw = min(leader_hw, self.log.log_end_offset)
        if hw > self.high_watermark:
            self.high_watermark = hw
            self.log.memory.high_watermark_moved()
            self.notify_data()

    def _complete_hw_waiters(self) -> None:
        if not self._hw_waiters:
            return
        hw = self.high_watermark
        keep: list[tuple[int, asyncio.Future[int]]] = []
        for offset, fut in self._hw_waiters:
            if offset <= hw:
                if not fut.done():
                    fut.set_result(0)
            else:
                keep.append((offset, fut))
        self._hw_waiters = keep

    def wait_for_high_watermark(self, offset: int) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        if self.high_watermark >= offset:
            fut.set_result(0)
        else:
            self._hw_waiters.append((offset, fut))
        return fut

    def fail_waiters(self, error_code: int) -> None:
        for _, fut in self._hw_waiters:
            if not fut.done():
                fut.set_result(error_code)
        self._hw_waiters = []

    # ------------------------------------------------------------------ long-poll fetch
    # fut: an asyncio.Future[object], or (replica_id >= 0) a ReplicaWaker
    def add_data_waiter(self, fut: Any, replica_id: int = -1) -> None:
        """Resolve `fut` (if still pending) on the next append / role change here or HW move. One
        future may wait on many partitions (a Fetch's long poll): its task then wakes directly,
        in the loop pass right after the notify. Consumers' done futures, left by waits that
        ended elsewhere, are dropped when the list has doubled since the last sweep (amortised
        O(1)). A follower (`replica_id` >= 0) registers a FollowerWaker instead, woken by appends
        and role changes only, replacing its last one (a follower fetches a partition in one
        session)."""
        if replica_id >= 0:
            self._replica_waiters[replica_id] = fut
            return
        waiters = self._data_waiters
        waiters.append(fut)
        if len(waiters) >= self._data_waiters_sweep:
            waiters[:] = [f for f in waiters if not f.done()]
            self._data_waiters_sweep = max(16, 2 * len(waiters))

    def notify_data(self) -> None:
        """An append or a role change: every long poll here, consumers' and followers'."""
        self.changes += 1
        if self._data_waiters:
            self._wake(self._data_waiters)
            self._data_waiters = []
        if self._replica_waiters:
            waiters, self._replica_waiters = self._replica_waiters, {}
            for waker in waiters.values():
                waker.wake(self)

    @staticmethod
    def _wake(waiters: list[asyncio.Future[object]]) -> None:
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    # ------------------------------------------------------------------ followers
    def update_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        f = self.followers.get(replica_id)
        if f is None:
            return
        if f.quiet_in is not None:
            f.settle()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            f.last_caught_up_ms = now_ms
        elif fetch_offset >= f.last_fetch_leader_leo >= 0:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        moved = fetch_offset != f.log_end_offset
        f.log_end_offset = fetch_offset
        f.last_fetch_ms = now_ms
        f.last_fetch_leader_leo = leo
        if moved or replica_id not in self.isr:
            # A follower's fetch that did not move its log end (an idle partition of its fetch
            # session, 7 of 8 per fetch with run.py's topics) changes neither the high watermark
            # nor the ISR: what else moves them recomputes them (appends, LeaderAndIsr).
            self.maybe_increment_high_watermark()
            self.maybe_expand_isr(replica_id)

    def maybe_expand_isr(self, replica_id: int) -> None:
        if replica_id in self.isr or self.isr_change_in_flight or replica_id not in self.replicas:
            return
        f = self.followers[replica_id]
        if (f.log_end_offset >= self.high_watermark
                and f.log_end_offset >= self.leader_epoch_start_offset):
            self._request_isr_change(self, tuple(sorted(self.isr + (replica_id,))))

    def out_of_sync_replicas(self, now_ms: int, lag_max_ms: int) -> list[int]:
        out = []
        for r in self.isr:
            if r == self.node_id:
                continue
            f = self.followers.get(r)
            if f is None or now_ms - f.caught_up_ms() > lag_max_ms:
                out.append(r)
        return out

    # ------------------------------------------------------------------ reading
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the high watermark, or the first offset of a transaction not yet decided
        and replicated if that is lower (read_committed consumers read up to it)."""
        first = self.log.first_unstable_offset(self.high_watermark)
        hw = self.high_watermark
        return hw if first is None or first > hw else first
