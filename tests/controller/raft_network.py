"""The in-memory network the tests of controller/raft.py wire their voters with: it delivers
messages only when pumped and drops those to or from a stopped voter."""
from __future__ import annotations

import asyncio
import pathlib
import random
from typing import Callable

from minibroker.controller import records
from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.metadata_store import MetadataStore
from minibroker.controller.quorum_state import ElectionState, QuorumStateStore
from minibroker.controller.raft import LEADER, RaftNode


class Network:
    def __init__(self, n: int = 3, timeout_ms: int = 1000, state_dir: pathlib.Path | None = None,
                 logs_on_disk: bool = False) -> None:
        """state_dir: each voter keeps its election state in a quorum-state file in
        state_dir/<id>, and with logs_on_disk its copy of the log there too (serve --data-dir)."""
        self.queue: list[tuple[int, int, tuple]] = []
        self.down: set[int] = set()
        self.led: list[tuple[int, int]] = []           # (voter, epoch) each on_leader
        self.timeout_ms, self.state_dir = timeout_ms, state_dir
        self.logs_on_disk = logs_on_disk
        self.on_disk_when_sent: list[tuple[int, tuple, ElectionState | None]] = []
        ids = list(range(1, n + 1))
        self.nodes = {i: self._node(i, ids) for i in ids}

    def _node(self, i: int, ids: list[int], forgot: bool = False) -> RaftNode:
        home = None if self.state_dir is None or forgot else str(self.state_dir / str(i))
        store = None if home is None else QuorumStateStore(home)
        log = MetadataLog(None if home is None or not self.logs_on_disk else MetadataStore(home))

        def send(dest: int, m: tuple) -> None:
            self.queue.append((i, dest, m))
            if store is not None:
                self.on_disk_when_sent.append((i, m, store.load()))
        node = RaftNode(i, ids, ids, log, send, self.timeout_ms, random.Random(i),
                        lambda: 0, forgot=forgot, state=store)
        node.on_leader = lambda epoch: self.led.append((i, epoch))
        return node

    def restart_empty(self, i: int) -> RaftNode:
        """Voter i back without its log and election state (serve --processes without
        --data-dir)."""
        self.down.discard(i)
        self.nodes[i] = self._node(i, sorted(self.nodes), forgot=True)
        return self.nodes[i]

    def restart(self, i: int) -> RaftNode:
        """Voter i back with its election state read from its quorum-state file (and its log
        copy read back, if on disk)."""
        self.down.discard(i)
        self.nodes[i] = self._node(i, sorted(self.nodes))
        return self.nodes[i]

    def deliver(self, keep: Callable[[int, int, tuple], bool]) -> None:
        """One round: the queued messages `keep` accepts are delivered, the others lost."""
        batch, self.queue = self.queue, []
        for src, dest, msg in batch:
            if keep(src, dest, msg):
                self.nodes[dest].receive(src, msg)

    def leaders(self, epoch: int) -> list[int]:
        return [i for i, n in self.nodes.items() if n.role == LEADER and n.epoch == epoch]

    async def pump(self, rounds: int = 50) -> None:
        for _ in range(rounds):
            await asyncio.sleep(0)                     # appends' replication, scheduled soon
            if not self.queue:
                await asyncio.sleep(0)
                if not self.queue:
                    return
            batch, self.queue = self.queue, []
            for src, dest, msg in batch:
                if src not in self.down and dest not in self.down:
                    self.nodes[dest].receive(src, msg)
        raise AssertionError("messages still flowing after 50 rounds")

    def entries(self, i: int) -> list:
        log = self.nodes[i].log
        return [log.entry(o) for o in range(log.base, len(log))]


def fence(i: int):
    return records.fence_broker(i, 1)


async def elect(net: Network, i: int) -> RaftNode:
    net.nodes[i].stand()
    await net.pump()
    assert net.nodes[i].role == LEADER
    return net.nodes[i]


async def elect_and_commit(net: Network, i: int, record) -> RaftNode:
    """Voter i elected; `record` appended in its epoch and committed (a majority is up)."""
    leader = await elect(net, i)
    leader.append(leader.epoch, record)
    waiting = asyncio.ensure_future(leader.commit_to(leader.epoch, len(leader.log)))
    await net.pump()
    await asyncio.wait_for(waiting, 1)
    return leader
