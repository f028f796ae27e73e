"""Incremental fetch sessions (KIP-227), per broker.

A consumer opens a session with a full fetch (session_id 0, epoch 0); later requests carry only
the partitions whose fetch position changed (and forgotten ones), and responses carry only the
partitions with something new: records, an error, or a moved high watermark / last stable offset
/ log start offset. Requests with epoch -1 are sessionless full fetches, as before.
Sessions live in a bounded cache (max.incremental.fetch.session.cache.slots), least recently
used first out; ids come from the broker's seeded rng.
"""
from __future__ import annotations

import asyncio
import random
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka.errors import FetchSessionIdNotFoundError, InvalidFetchSessionEpochError

if TYPE_CHECKING:
    from minibroker.broker.partition import FollowerState, Partition

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


# A follower's session visits every partition once this long at least, quiet or not: a change
# that reached a partition without its `changes` counter is answered within it.
QUIET_REFRESH_MS = 1000


@dataclass(slots=True)
class SessionPartition:
    """The fields of a FetchRequest partition a session remembers, under the same names."""
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    sent: tuple[int, int, int] | None = None    # (hw, lso, log start offset) last answered
    # A follower's partition with nothing to say is quiet: its fetches skip it (broker/
    # replica_manager.py) until the partition's `changes` counter moves from this value (-1: not
    # quiet), its log start moves, or the follower names it. The Partition and FollowerState it
    # was marked with.
    quiet: int = -1
    quiet_partition: Partition | None = None
    quiet_follower: FollowerState | None = None


class FollowerWaker:
    """What a follower's session registers with its partitions' long polls (Partition.
    add_data_waiter): it outlives one fetch, so a quiet partition, not visited by the next fetch,
    still wakes it, and says which partitions woke it (the fetch did not visit the quiet ones)."""
    __slots__ = ("fut", "woken")

    def __init__(self) -> None:
        # the parked fetch's future (its result None, or first_fetch.WAKE), None between fetches
        self.fut: asyncio.Future[object] | None = None
        self.woken: list[Partition] = []   # the Partitions that notified while it was parked

    def wake(self, partition: Partition) -> None:
        fut = self.fut
        if fut is not None:
            self.woken.append(partition)
            if not fut.done():
                fut.set_result(None)


class FetchSession:
    def __init__(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = 1                   # the epoch the next incremental request must carry
        self.partitions: dict[tuple[str, int], SessionPartition] = {}
        self.undeleted_counts: dict[str, int] = {}
        self._items: list[tuple[str, SessionPartition, int]] | None = None
        self.waker = FollowerWaker()
        # A follower's fetch at which its quiet partitions were skipped (caught up then: the
        # ISR reads it through FollowerState.quiet_in), and when the next full visit is due.
        self.quiet_fetch_ms = 0
        self.full_visit_ms = 0

    # topics, forgotten: a FetchRequest's (kafka-python structs)
    def update(self, topics: Iterable[Any], forgotten: Iterable[Any] | None) -> None:
        for t in topics:
            count = getattr(t, "undeleted_partition_count", -1)
            if self.undeleted_counts.get(t.topic) != count:
                self.undeleted_counts[t.topic] = count
                self._items = None
            for fp in t.partitions:
                key = (t.topic, fp.partition)
                sp = self.partitions.get(key)
                if sp is None:
                    self.partitions[key] = SessionPartition(
                        fp.partition, fp.fetch_offset, fp.current_leader_epoch,
                        fp.last_fetched_epoch, fp.log_start_offset, fp.partition_max_bytes)
                    self._items = None
                    continue
                # In place: the cached items() keep naming it (a follower's incremental fetch
                # changes one partition of the eight or so its session holds).
                sp.quiet = -1
                sp.fetch_offset = fp.fetch_offset
                sp.current_leader_epoch = fp.current_leader_epoch
                sp.last_fetched_epoch = fp.last_fetched_epoch
                sp.log_start_offset = fp.log_start_offset
                sp.partition_max_bytes = fp.partition_max_bytes
        for t in forgotten or ():
            for pid in t.partitions:
                sp = self.partitions.pop((t.topic, pid), None)
                if sp is not None:
                    self._items = None
                    self.unquiet(sp)

    def unquiet(self, sp: SessionPartition) -> None:
        """No longer skipped by this session: its follower's caught-up time stops following the
        session's fetches."""
        f = sp.quiet_follower
        if f is not None and f.quiet_in is self:
            f.settle()
        sp.quiet, sp.quiet_partition, sp.quiet_follower = -1, None, None

    def items(self) -> list[tuple[str, SessionPartition, int]]:
        """(topic, session partition, undeleted partition count) for each partition held; the
        same list until a partition is added or forgotten or a count changes (read-only)."""
        if self._items is None:
            self._items = [(topic, sp, self.undeleted_counts.get(topic, -1))
                           for (topic, _), sp in self.partitions.items()]
        return self._items

    def changed(self, topic: str, partition: int, state: tuple[int, int, int]) -> bool:
        """Record what a response says of a partition; True if it differs from the last one."""
        sp = self.partitions.get((topic, partition))
        if sp is None:
            return True
        if sp.sent == state:
            return False
        sp.sent = state
        return True


class FetchSessionCache:
    def __init__(self, max_slots: int, rng: random.Random) -> None:
        self.max_slots = max_slots
        self._rng = rng
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def _new(self) -> FetchSession | None:
        if self.max_slots <= 0:
            return None
        while len(self._sessions) >= self.max_slots:
            self._sessions.popitem(last=False)
        session_id = 0
        while session_id == 0 or session_id in self._sessions:
            session_id = self._rng.randrange(1, 2**31)
        s = self._sessions[session_id] = FetchSession(session_id)
        return s

    def resolve(self, req: Any
                ) -> tuple[int, FetchSession | None, bool, list[tuple[str, Any, int]]]:
        """(error code, session or None, incremental?, [(topic, partition fields, count)])."""
        sid, epoch = req.session_id, req.session_epoch
        if epoch == FINAL_EPOCH:                     # sessionless (closing sid if given)
            self._sessions.pop(sid, None)
            return 0, None, False, _full_items(req)
        if epoch == INITIAL_EPOCH:                   # a new full session (replacing sid)
            self._sessions.pop(sid, None)
            s = self._new()
            if s is None:
                return 0, None, False, _full_items(req)
            s.update(req.topics, ())
            return 0, s, False, s.items()
        s = self._sessions.get(sid)
        if s is None:
            return FetchSessionIdNotFoundError.errno, None, False, []
        if epoch != s.epoch:
            return InvalidFetchSessionEpochError.errno, None, False, []
        self._sessions.move_to_end(sid)
        s.epoch += 1
        s.update(req.topics, req.forgotten_topics_data)
        return 0, s, True, s.items()


def _full_items(req: Any) -> list[tuple[str, Any, int]]:
    return [(t.topic, fp, getattr(t, "undeleted_partition_count", -1))
            for t in req.topics for fp in t.partitions]
