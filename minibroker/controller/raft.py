"""One voter of the metadata quorum when each broker is its own process (serve --processes).

KRaft's Raft, reduced to what minibroker needs; the voters talk in messages (tuples) that the
caller delivers (processes/: relayed by the supervisor), so nothing here knows of sockets:
- each voter holds its own MetadataLog copy and, per record, the epoch whose leader wrote it
  (with --data-dir on disk too, as KRaft's batches carry partitionLeaderEpoch, so a copy read
  back compares as it did before the restart);
- a follower that hears no leader for controller.quorum.election.timeout.ms (stretched by up to
  half, seeded, so two rarely stand at once), or is told its leader's process died, stands: epoch
  + 1, a vote for itself, a vote request to the others. A voter grants one vote per epoch, to a
  candidate whose log is at least as up to date as its own (last epoch, then length). A majority
  of all the voters elects; with fewer alive nobody leads (Majority rule, as KRaft). A candidate
  not elected stands again after 50-200 ms (seeded: a split vote), doubling each time (KRaft's
  election back-off); at the first start every voter stands that soon;
- the leader sends each follower the records after those it acknowledged (a heartbeat, empty, at
  least every timeout / 4). A follower keeps the records it holds of the same epoch at the same
  offset and replaces its tail from the first that differs (Raft's log matching); one whose log
  does not end where the leader expects (another epoch at the offset before) gets the leader's
  whole copy instead (KRaft's FetchSnapshot);
- a record is committed once a majority of the voters acknowledged it and it is of the leader's
  epoch (Raft's rule; the earlier ones commit with it). A new leader proposes its uncommitted tail
  again under its own epoch (rewritten so, on disk too, before it counts its own copy), and its
  controller starts once that tail is committed (so it replays only what a majority holds);
- a voter knowing the leader of its epoch grants no vote in it (KRaft's FollowerState);
- with --data-dir a voter's epoch, vote and known leader are in its quorum-state file
  (controller/quorum_state.py), written before it grants a vote or acts in a new epoch, so a
  voter started again cannot vote twice in one epoch;
- a voter restarted without its log and state (no --data-dir) does not stand until a leader gave
  it the log (it may be missing records it acknowledged before), and grants no vote until it
  heard from a leader or one election timeout passed (an epoch it voted in before may still be
  deciding; after that, any election it voted in is over: KIP-853 would instead make it a new
  voter). Once a voter's process died, the leader no longer counts what it acknowledged.
Records in a --data-dir written before records kept their epoch count as epoch 0.
"""
from __future__ import annotations

import asyncio
import random
from typing import Any, Callable, Iterator

from minibroker.controller.image import MetadataImage
from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.metadata_store import Entry
from minibroker.controller.quorum import NotLeader, QuorumInfo, ReplicaState
from minibroker.controller.quorum_state import ElectionState, QuorumStateStore
from minibroker.controller.snapshot import from_text, to_text

FOLLOWER, CANDIDATE, LEADER = "follower", "candidate", "leader"
Message = tuple[Any, ...]            # ("vote" | "voted" | "append" | "appended" | "copy", epoch, ...)
MAX_RECORDS_PER_APPEND = 1000


class RaftNode:
    def __init__(self, node_id: int, voters: list[int], nodes: list[int], log: MetadataLog,
                 send: Callable[[int, Message], None], election_timeout_ms: int,
                 rng: random.Random, now_ms: Callable[[], int], forgot: bool = False,
                 state: QuorumStateStore | None = None) -> None:
        """`nodes`: every broker; those not among `voters` observe (they get the log and learn
        the leader, but neither stand, vote nor count). `forgot`: started again without its
        log and election state; `state`: where the election state is kept (None: memory)."""
        self.node_id, self.voters, self.log = node_id, sorted(voters), log
        self.others = [v for v in sorted(nodes) if v != node_id]
        self._send, self.rng, self.now_ms = send, rng, now_ms
        self.timeout = election_timeout_ms / 1000
        self.can_stand = not forgot and node_id in self.voters
        self.epoch, self.voted_for, self.leader_id, self.role = 0, -1, -1, FOLLOWER
        self._epoch_leader = -1                     # the leader heard from in this epoch
        self._state = state
        saved = state.load() if state is not None else None
        if saved is not None:
            self.epoch, self.voted_for, self._epoch_leader = saved
        self._saved = saved or ElectionState(0, -1, -1)
        # Forgot whom it voted for: no vote until a leader is heard or the election is over.
        self._no_votes_until = asyncio.get_running_loop().time() + self.timeout if forgot else 0.0
        self.commit = log.base                      # the committed length (high watermark)
        self.on_leader: Callable[[int], None] = lambda epoch: None   # ready to lead `epoch`
        self.on_resign: Callable[[], None] = lambda: None
        self._changed = asyncio.Event()
        self._votes: set[int] = set()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._deadline = 0.0
        self._ready_at = -1                         # the length to commit before leading
        self._next: dict[int, int] = {}
        self._match: dict[int, int] = {}
        self._copy: set[int] = set()
        self._inflight: dict[int, float] = {}
        self._last_sent: dict[int, float] = {}
        self._last_fetch_ms: dict[int, int] = {}
        self._kicked = False
        self._lost = 0                              # elections stood for in a row, not won

    # ------------------------------------------------------------------ the log
    def epoch_at(self, offset: int) -> int:
        return self.log.epoch_at(offset)

    def last(self) -> tuple[int, int]:
        """(last epoch, length): how up to date this copy is."""
        return self.epoch_at(len(self.log) - 1), len(self.log)

    def append(self, epoch: int, record: Any) -> int:
        if self.role != LEADER or epoch != self.epoch:
            raise NotLeader(f"voter {self.node_id} does not lead epoch {epoch}")
        offset = self.log.append(record, epoch)
        if not self._kicked:                        # one round of appends per turn of the loop
            self._kicked = True
            asyncio.get_running_loop().call_soon(self._replicate_now)
        return offset

    async def commit_to(self, epoch: int, end: int) -> None:
        """Until a majority holds the first `end` records (NotLeader once not leading `epoch`)."""
        self.log.flush()
        self._advance()
        while self.commit < end:
            if self.role != LEADER or epoch != self.epoch:
                raise NotLeader(f"voter {self.node_id} lost epoch {epoch}")
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append((end, fut))
            await fut

    def snapshotted(self, before: int) -> None:
        """The log's base moved from `before` (a snapshot): send the followers the snapshot
        (they hold no image to take their own, so their copies would otherwise only grow)."""
        if self.log.base > before:
            self._copy.update(self.others)

    # ------------------------------------------------------------------ time
    async def run(self, first_boot: bool = False) -> None:
        """The voter's clock: stand when the leader went quiet, heartbeat when leading.
        `first_boot`: every voter starts empty and none leads, so stand soon."""
        loop = asyncio.get_running_loop()
        self._reset_timer(soon=first_boot)
        while True:
            await asyncio.sleep(self.timeout / 10)
            if self.role == LEADER:
                self._replicate(loop.time())
            elif loop.time() >= self._deadline:
                self.stand()

    def _reset_timer(self, soon: bool = False) -> None:
        now = asyncio.get_running_loop().time()
        # Soon: 50-200 ms, doubling (up to half the timeout) per election lost in a row.
        base = min(0.05 * 2 ** self._lost, self.timeout / 2)
        self._deadline = now + (base * (1 + 3 * self.rng.random()) if soon
                                else self.timeout * (1 + self.rng.random() / 2))

    def peer_died(self, node: int) -> None:
        """The supervisor saw `node`'s process end: if it led, stand soon instead of waiting
        out the election timeout; if this voter leads, what `node` acknowledged no longer counts
        (started again without its log, it no longer holds it)."""
        self._match.pop(node, None)
        if node == self.leader_id and self.role != LEADER:
            self.leader_id = -1
            self._reset_timer(soon=True)
            self._notify()

    async def leader_change(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # ------------------------------------------------------------------ elections
    def stand(self) -> None:
        """Stand for election now (a new epoch, a vote for itself, requests to the others); no
        leader by the (short, seeded) back-off: stand again (a split vote)."""
        self._reset_timer(soon=True)
        if not self.can_stand:
            return
        self._lost += 1                             # until elected or following
        self._resign_if_leading()
        self.epoch += 1
        self.role, self.voted_for, self.leader_id = CANDIDATE, self.node_id, -1
        self._epoch_leader = -1
        self._persist()
        self._votes = {self.node_id}
        self._notify()
        last_epoch, end = self.last()
        for v in self.voters:
            if v != self.node_id:
                self._send(v, ("vote", self.epoch, self.node_id, last_epoch, end))
        self._maybe_won()

    def receive(self, src: int, msg: Message) -> None:
        kind, epoch = msg[0], msg[1]
        if epoch > self.epoch:
            self._resign_if_leading()
            self.epoch, self.voted_for, self.role, self._epoch_leader = epoch, -1, FOLLOWER, -1
            self._persist()
            if self.leader_id != -1:
                self.leader_id = -1
                self._notify()
        getattr(self, "_on_" + kind)(src, *msg[1:])

    def _persist(self) -> None:
        """The election state on disk before anything is done in it (a vote, a new epoch)."""
        now = ElectionState(self.epoch, self.voted_for, self._epoch_leader)
        if now != self._saved:
            if self._state is not None:
                self._state.save(now)
            self._saved = now

    def _on_vote(self, src: int, epoch: int, candidate: int, last_epoch: int, end: int) -> None:
        grant = (epoch == self.epoch and self.role == FOLLOWER and self.node_id in self.voters
                 and self.voted_for in (-1, candidate) and self._epoch_leader == -1
                 and (last_epoch, end) >= self.last()
                 and asyncio.get_running_loop().time() >= self._no_votes_until)
        if grant:
            self.voted_for = candidate
            self._persist()
            self._reset_timer()
        self._send(src, ("voted", self.epoch, grant))

    def _on_voted(self, src: int, epoch: int, granted: bool) -> None:
        if self.role == CANDIDATE and epoch == self.epoch and granted and src in self.voters:
            self._votes.add(src)
            self._maybe_won()

    def _maybe_won(self) -> None:
        if self.role != CANDIDATE or 2 * len(self._votes) <= len(self.voters):
            return
        self.role, self.leader_id, self._lost = LEADER, self.node_id, 0
        self._epoch_leader = self.node_id
        self._persist()
        # The uncommitted tail, proposed again under this epoch: it commits with this epoch. On
        # disk before this copy counts as holding it: read back with the older epochs, it could
        # vote for a stale log that overwrites the tail once committed.
        self.log.relabel(self.commit, self.epoch)
        self.log.flush()
        end = len(self.log)
        self._ready_at = end
        self._next = {v: end for v in self.others}
        self._match, self._copy, self._inflight = {}, set(), {}
        self._notify()
        self._replicate_now()
        self._advance()

    def _resign_if_leading(self) -> None:
        was = self.role == LEADER
        self.role = FOLLOWER
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(NotLeader(f"voter {self.node_id} resigned epoch {self.epoch}"))
        self._waiters = []
        if was:
            self.on_resign()

    def _follow(self, epoch: int, leader: int) -> None:
        if self.role != FOLLOWER:
            self._resign_if_leading()
        if self.leader_id != leader:
            self.leader_id = leader
            self._notify()
        self._epoch_leader, self._no_votes_until = leader, 0.0
        self._persist()
        self._lost = 0
        self._reset_timer()

    # ------------------------------------------------------------------ replication: follower
    def _on_append(self, src: int, epoch: int, leader: int, prev_end: int, prev_epoch: int,
                   entries: list[tuple[int, Entry]], commit: int) -> None:
        if epoch < self.epoch:
            self._send(src, ("appended", self.epoch, False, len(self.log)))
            return
        self._follow(epoch, leader)
        ok = self.log.base <= prev_end <= len(self.log) and self.epoch_at(prev_end - 1) == prev_epoch
        if ok:
            same = 0                                    # held already (same offset and epoch)
            while same < len(entries) and prev_end + same < len(self.log) \
                    and self.epoch_at(prev_end + same) == entries[same][0]:
                same += 1
            if same < len(entries):                     # from there on, the leader's
                self.log.write_from(prev_end + same, entries[same:])
                self.log.flush()
            self.can_stand = self.node_id in self.voters
            self.commit = max(self.commit, min(commit, prev_end + len(entries)))
        # Matched: up to the last record sent (a tail it kept after them is not the leader's).
        matched = prev_end + len(entries) if ok else len(self.log)
        self._send(src, ("appended", self.epoch, ok, matched))

    def _on_copy(self, src: int, epoch: int, leader: int, snapshot: str | None, base: int,
                 entries: list[Entry], epochs: list[int], snapshot_epoch: int, commit: int) -> None:
        if epoch < self.epoch:
            self._send(src, ("appended", self.epoch, False, len(self.log)))
            return
        self._follow(epoch, leader)
        self.log.replace(None if snapshot is None else from_text(snapshot), base,
                         list(zip(epochs, entries)), snapshot_epoch)
        self.can_stand = self.node_id in self.voters
        self.commit = min(commit, len(self.log))
        self._send(src, ("appended", self.epoch, True, len(self.log)))

    # ------------------------------------------------------------------ replication: leader
    def _on_appended(self, src: int, epoch: int, ok: bool, end: int) -> None:
        if self.role != LEADER or epoch != self.epoch:
            return
        self._inflight.pop(src, None)
        self._last_fetch_ms[src] = self.now_ms()
        if ok:
            self._match[src], self._next[src] = end, end
            self._copy.discard(src)
            self._advance()
        else:                                       # it holds at most `end` records now
            self._match[src] = min(self._match.get(src, 0), end)
            self._copy.add(src)
        if src in self._copy or self._next[src] < len(self.log):
            self._send_to(src, asyncio.get_running_loop().time())

    def _replicate_now(self) -> None:
        self._kicked = False
        if self.role == LEADER:
            self._replicate(asyncio.get_running_loop().time())

    def _replicate(self, now: float) -> None:
        heartbeat = self.timeout / 4
        for v in self.others:
            sent = self._inflight.get(v)
            if sent is not None and now - sent < self.timeout:
                continue                                # one request at a time, until lost
            if v in self._copy or self._next[v] < len(self.log) or v not in self._last_sent \
                    or now - self._last_sent[v] >= heartbeat:
                self._send_to(v, now)

    def _send_to(self, v: int, now: float) -> None:
        log, nxt, end = self.log, self._next[v], len(self.log)
        if v in self._copy or nxt < log.base or nxt > end:
            snapshot = None if log.snapshot is None else to_text(log.snapshot)
            records = log.records(log.base, end)
            msg: Message = ("copy", self.epoch, self.node_id, snapshot, log.base,
                            [e for _, e in records], [epoch for epoch, _ in records],
                            log.snapshot_epoch, self.commit)
        else:
            upto = min(end, nxt + MAX_RECORDS_PER_APPEND)
            msg = ("append", self.epoch, self.node_id, nxt, self.epoch_at(nxt - 1),
                   log.records(nxt, upto), self.commit)
        self._inflight[v] = self._last_sent[v] = now
        self._send(v, msg)

    def _advance(self) -> None:
        if self.role != LEADER:
            return
        ends = sorted([len(self.log)] + [self._match.get(v, 0) for v in self.voters
                                         if v != self.node_id], reverse=True)
        n = ends[len(self.voters) // 2]                 # held by a majority
        if n > self.commit and self.epoch_at(n - 1) == self.epoch:
            self.commit = n
            ready = [f for e, f in self._waiters if e <= n]
            self._waiters = [(e, f) for e, f in self._waiters if e > n]
            for f in ready:
                if not f.done():
                    f.set_result(None)
        if self._ready_at >= 0 and self.commit >= self._ready_at:
            self._ready_at = -1
            self.on_leader(self.epoch)

    # ------------------------------------------------------------------ DescribeQuorum
    def describe(self) -> QuorumInfo:
        """The quorum as this voter sees it (the leader's view is the one to ask)."""
        now, hw = self.now_ms(), self.commit

        def state(v: int) -> ReplicaState:
            if v == self.node_id:
                return ReplicaState(v, len(self.log), now, now)
            end = self._match.get(v, -1) if self.role == LEADER else -1
            at = self._last_fetch_ms.get(v, -1) if self.role == LEADER else -1
            return ReplicaState(v, end, at, at if end >= hw else -1)
        nodes = sorted(set(self.others) | {self.node_id})
        return QuorumInfo(self.leader_id, self.epoch, hw,
                          tuple(state(v) for v in self.voters),
                          tuple(state(o) for o in nodes if o not in self.voters))


class RaftLog:
    """The log as the controller of one epoch sees it (Controller's metadata_log): reads the
    voter's copy, appends as leader of `epoch` (NotLeader once it is not), commits at a
    majority."""

    def __init__(self, node: RaftNode, epoch: int) -> None:
        self.node, self.epoch = node, epoch

    def append(self, record: Any) -> int:
        return self.node.append(self.epoch, record)

    async def commit(self) -> None:
        await self.node.commit_to(self.epoch, len(self.node.log))

    def read_all(self) -> Iterator[tuple[int, Any]]:
        return self.node.log.read_all()

    @property
    def snapshot(self) -> MetadataImage | None:
        return self.node.log.snapshot

    def maybe_snapshot(self, image: MetadataImage, max_bytes: int) -> None:
        node = self.node
        if node.role == LEADER and node.epoch == self.epoch and node.commit == len(node.log):
            before = node.log.base
            node.log.maybe_snapshot(image, max_bytes)
            node.snapshotted(before)

    def next_offset(self) -> int:
        return self.node.log.next_offset()

    def __len__(self) -> int:
        return len(self.node.log)
