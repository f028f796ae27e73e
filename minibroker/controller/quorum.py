"""The metadata quorum: KRaft's replicated metadata log, in process.

Combined mode (KRaft's `process.roles=broker,controller`): the controller-eligible brokers
(`controller.quorum.voters`, by default every broker) each hold their own copy of the metadata
log. One voter is the leader — the broker hosting the active controller — for one epoch (the
controller epoch). How it maps to KRaft's Raft:
- append: the leader appends a record to its copy and to every live voter's copy before the
  record counts as committed (`commit()`), so any live voter that becomes leader holds every
  committed record. KRaft needs a majority of fetches; here replication cannot fail, so a record
  reaches every live voter at once, and the one await in `commit()` is the fetch round trip.
- fencing: an append from any but the current leader and epoch raises NotLeader, as a stale
  leader's writes are refused by the quorum (a resigned or stopped controller writes nothing).
- election: the live voter with the longest log (Raft's "at least as up to date" vote), first
  after the previous leader in id order; the epoch goes up by one. Not enforced: a majority of
  voters alive (with every voter stopped and a stale one started first, it would lead with its
  shorter log — KRaft would wait for a majority).
- a voter that starts again catches up from the leader's copy (KRaft's Fetch): its copy is cut
  back to where they agree, then the rest is copied (from the leader's snapshot, KRaft's
  FetchSnapshot, when they do not share one).
- snapshots: every live copy snapshots the committed image together (metadata_log.py); with a
  data directory each copy is on disk (metadata_store.py), fsynced at each commit.
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any, Iterator

from minibroker.controller.image import MetadataImage
from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.metadata_store import MetadataStore

METADATA_DIR = "__cluster_metadata-0"


@dataclass(frozen=True)
class ReplicaState:
    """One replica of __cluster_metadata-0 as DescribeQuorum reports it (-1: unknown)."""
    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True)
class QuorumInfo:
    """DescribeQuorum's answer (KRaft's LeaderState.describeQuorum)."""
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...]


class NotLeader(Exception):
    """An append from a controller the quorum no longer has as leader (a stale epoch)."""


class MetadataQuorum:
    def __init__(self, voters: list[int], data_dir: str | None = None) -> None:
        """data_dir (serve --data-dir): each voter's copy on disk, in
        <data_dir>/broker-<id>/__cluster_metadata-0, and loaded from there."""
        self.voters = sorted(voters)
        self.copies: dict[int, MetadataLog] = {v: MetadataLog(None if data_dir is None else MetadataStore(
            os.path.join(data_dir, f"broker-{v}", METADATA_DIR))) for v in self.voters}
        self.live: set[int] = set()
        self.leader_id = -1
        self.epoch = 0
        self.last_leader = -1
        self._waiters: list[tuple[int, asyncio.Future[int]]] = []

    # ------------------------------------------------------------------ membership
    def voter_started(self, voter: int) -> None:
        if voter not in self.copies:
            return
        self.live.add(voter)
        source = self.copies.get(self.leader_id)
        if source is not None and voter != self.leader_id:
            self.copies[voter].catch_up(source)

    def voter_stopped(self, voter: int) -> None:
        self.live.discard(voter)
        if voter == self.leader_id:
            self.resign()

    def resign(self) -> None:
        """The leader stops leading: its controller's appends are refused from now on."""
        if self.leader_id >= 0:
            self.last_leader = self.leader_id
        self.leader_id = -1

    def elect(self, candidates: list[int] | None = None) -> int:
        """A new leader and epoch from the live voters (among `candidates`: those that reach a
        majority across network partitions); -1 if there is none."""
        live = [v for v in self.voters if v in self.live
                and (candidates is None or v in candidates)]
        if not live:
            return -1
        longest = max(len(self.copies[v]) for v in live)
        best = [v for v in live if len(self.copies[v]) == longest]
        after = [v for v in best if v > self.last_leader]
        self.leader_id = (after or best)[0]
        self.epoch += 1
        return self.leader_id

    def describe(self, now_ms: int, observers: list[int]) -> QuorumInfo:
        """The quorum as its leader sees it at `now_ms`. A live voter has every committed record
        (appends reach it at once), so it fetched and caught up now; a stopped one: its copy's
        length, timestamps unknown (-1). `observers`: the unfenced brokers, of which those not
        voting follow the committed log (serve --processes: controller/raft.py describes)."""
        hw = len(self.leader_log())
        voting = self.voters
        def state(v: int, end: int, live: bool) -> ReplicaState:
            at = now_ms if live else -1
            return ReplicaState(v, end, at, at if live and end >= hw else -1)
        voters = tuple(state(v, len(self.copies[v]), v in self.live) for v in voting)
        return QuorumInfo(self.leader_id, self.epoch, hw, voters,
                          tuple(state(o, hw, True) for o in sorted(observers)
                                if o not in voting))

    # ------------------------------------------------------------------ the log
    def leader_log(self) -> MetadataLog:
        """The leader's copy (else the longest one): what a reader of "the" log sees."""
        if self.leader_id in self.copies:
            return self.copies[self.leader_id]
        return max(self.copies.values(), key=len)

    def view(self, leader_id: int, epoch: int) -> "LeaderLog":
        return LeaderLog(self, leader_id, epoch)

    def append(self, leader_id: int, epoch: int, record: Any) -> int:
        if leader_id != self.leader_id or epoch != self.epoch:
            raise NotLeader(f"controller {leader_id} epoch {epoch} is not the leader "
                            f"(leader {self.leader_id}, epoch {self.epoch})")
        own = self.copies[leader_id]
        offset = own.append(record, epoch)
        entry = own.entry(offset)
        for v in self.voters:
            if v != leader_id and v in self.live:
                self.copies[v].append_entry(entry, epoch)
        return offset

    async def commit(self, leader_id: int, epoch: int) -> None:
        """Every live voter holds what the leader appended (the high watermark passes it): wake
        those waiting for it, then yield once — the fetch round trip."""
        end = len(self.copies[leader_id])
        for v in self.voters:
            if v in self.live:
                self.copies[v].flush()
        if self._waiters:
            ready = [f for n, f in self._waiters if n <= end]
            self._waiters = [(n, f) for n, f in self._waiters if n > end]
            for f in ready:
                if not f.done():
                    f.set_result(end)
        await asyncio.sleep(0)
        if leader_id != self.leader_id or epoch != self.epoch:
            raise NotLeader(f"controller {leader_id} lost leadership at epoch {epoch}")

    def maybe_snapshot(self, leader_id: int, epoch: int, image: MetadataImage, max_bytes: int) -> None:
        """Each live voter's copy snapshots the leader's committed image when it is due (all
        hold the same records, so they snapshot together; a stopped voter catches up later)."""
        if leader_id != self.leader_id or epoch != self.epoch:
            return
        for v in self.voters:
            if v in self.live:
                self.copies[v].maybe_snapshot(image, max_bytes)

    def wait_committed(self, end_offset: int) -> asyncio.Future[int]:
        """Resolves (to the log's length) at the first commit that leaves the log `end_offset`
        records long or longer (KRaft's handleCommit listener); registered at the call."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((end_offset, fut))
        return fut


class LeaderLog:
    """The log as one controller sees it: reads its own voter's copy, appends as leader of its
    epoch (refused once it is not)."""

    def __init__(self, quorum: MetadataQuorum, leader_id: int, epoch: int) -> None:
        self.quorum, self.leader_id, self.epoch = quorum, leader_id, epoch

    def append(self, record: Any) -> int:
        return self.quorum.append(self.leader_id, self.epoch, record)

    async def commit(self) -> None:
        await self.quorum.commit(self.leader_id, self.epoch)

    def read_all(self) -> Iterator[tuple[int, Any]]:
        return self.quorum.copies[self.leader_id].read_all()

    @property
    def snapshot(self) -> MetadataImage | None:
        return self.quorum.copies[self.leader_id].snapshot

    def maybe_snapshot(self, image: MetadataImage, max_bytes: int) -> None:
        self.quorum.maybe_snapshot(self.leader_id, self.epoch, image, max_bytes)

    def next_offset(self) -> int:
        return self.quorum.copies[self.leader_id].next_offset()

    def __len__(self) -> int:
        return len(self.quorum.copies[self.leader_id])
