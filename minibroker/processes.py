"""`minibroker serve --processes`: one broker per process, so a cluster can use as many cores.

The first process runs the controller and broker 1 (a Cluster with that one broker local); it
starts brokers 2..N as child processes (`python -m minibroker.processes`), each handed one end of a
socketpair. Everything brokers say to each other stays on the wire as before (the controller's
LeaderAndIsr / UpdateMetadata on the control-plane listeners, followers' Fetch requests); the
socketpair carries what a broker asks of the controller (ControllerChannel's calls: registration,
AlterPartition, forwarded admin requests, producer id blocks) as pickled (id, method, args) frames
answered in any order. Nothing listens for it: only the parent and the child hold the pair.

A child whose socketpair closes (the process died or was killed) is fenced at once, as a broker
whose session expired: its partitions' leadership moves within their ISRs, so an acks=all write
survives. The parent then reaps it and, unless `serve --no-restart`, starts it again under the same
node id (after a back-off that doubles while it keeps dying): with `--data-dir` it loads its logs,
without it comes back as an empty replica that catches up from the ISR; either way it registers
with a new broker epoch and rejoins the ISRs once caught up. A child whose parent goes away stops
its broker and exits. Not yet: the first process (broker 1 and the controller) is still special.
"""
from __future__ import annotations

import asyncio
import logging
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
from typing import Any

from minibroker.broker.broker import Broker
from minibroker.broker.context import ControllerChannel, ItemResult
from minibroker.broker.faults import Faults
from minibroker.clock import SEEDED_WALL_BASE_MS, Clock
from minibroker.controller.quorum import QuorumInfo
from minibroker.ids import IdSource
from minibroker.log.memory import keep_freed_batches_for_reuse
from minibroker.security.acl import AclBinding, AclBindingFilter
from minibroker.security.credentials import store_for_users

log = logging.getLogger("minibroker.processes")

_LEN = struct.Struct(">I")
# What a broker may ask of the controller: ControllerChannel's methods (the parent answers these
# and the broker's own registration, nothing else).
CALLS = frozenset(name for name, member in vars(ControllerChannel).items()
                  if not name.startswith("_") and callable(member))


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(data)) + data


async def _read(reader: asyncio.StreamReader) -> Any:
    (n,) = _LEN.unpack(await reader.readexactly(_LEN.size))
    return pickle.loads(await reader.readexactly(n))


# ---------------------------------------------------------------------------- the child's side
class RemoteControllerChannel:
    """ControllerChannel for a broker in a child process: each call a frame to the parent."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._next = 0
        self._pending: dict[int, asyncio.Future] = {}
        self.closed = asyncio.get_running_loop().create_future()   # the parent went away

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._answers())

    async def _answers(self) -> None:
        try:
            while True:
                call_id, ok, value = await _read(self._reader)
                fut = self._pending.pop(call_id, None)
                if fut is not None and not fut.done():
                    (fut.set_result if ok else fut.set_exception)(value)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError("controller process gone"))
        if not self.closed.done():
            self.closed.set_result(None)

    async def call(self, method: str, *args: Any, **kw: Any) -> Any:
        self._next += 1
        fut = asyncio.get_running_loop().create_future()
        self._pending[self._next] = fut
        self._writer.write(_frame((self._next, method, args, kw)))
        return await fut

    def auto_create_topics(self, names: list[str]) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(self.call("auto_create_topics", names))

    # ControllerChannel's methods, each the parent's cluster.ControllerChannel method of the name.
    async def alter_partition(self, broker_id: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                              ) -> int:
        return await self.call("alter_partition", broker_id, topic, partition, leader_epoch,
                               partition_epoch, new_isr)

    async def allocate_producer_ids(self, count: int = 1000) -> tuple[int, int]:
        return await self.call("allocate_producer_ids", count)

    async def create_topics(self, specs: list[Any], validate_only: bool) -> list[ItemResult]:
        return await self.call("create_topics", specs, validate_only)

    async def delete_topics(self, names: list[str]) -> list[ItemResult]:
        return await self.call("delete_topics", names)

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None,
                                validate_only: bool) -> ItemResult:
        return await self.call("create_partitions", name, count, assignments, validate_only)

    async def alter_topic_configs(self, name: str, changes: dict[str, str | None], replace: bool,
                                  validate_only: bool) -> ItemResult:
        return await self.call("alter_topic_configs", name, changes, replace, validate_only)

    async def alter_broker_configs(self, resource_name: str, changes: dict[str, str | None],
                                   validate_only: bool, replace: bool = False
                                   ) -> ItemResult:
        return await self.call("alter_broker_configs", resource_name, changes, validate_only,
                               replace)

    async def alter_group_configs(self, group_id: str, changes: dict[str, str | None],
                                  validate_only: bool, replace: bool = False) -> ItemResult:
        return await self.call("alter_group_configs", group_id, changes, validate_only, replace)

    async def describe_group_configs(self, group_id: str) -> dict[str, str]:
        return await self.call("describe_group_configs", group_id)

    async def alter_user_scram_credentials(self, deletions: list[tuple[str, int]],
                                           upsertions: list[Any]) -> list[Any]:
        return await self.call("alter_user_scram_credentials", deletions, upsertions)

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[int, str | None]]:
        return await self.call("create_acls", bindings)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[Any]:
        return await self.call("delete_acls", filters)

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None
                            ) -> Any:
        return await self.call("elect_leaders", election_type, partitions)

    async def assign_partitions(self, assignments: list[tuple[str, int, list[int]]]) -> Any:
        return await self.call("assign_partitions", assignments)

    async def alter_partition_reassignments(self, items: list[Any], allow_rf_change: bool
                                            ) -> list[Any]:
        return await self.call("alter_partition_reassignments", items, allow_rf_change)

    async def list_partition_reassignments(self, wanted: dict[str, list[int]] | None
                                           ) -> list[Any]:
        return await self.call("list_partition_reassignments", wanted)

    async def partition_assignment_status(self, request_id: int) -> Any:
        return await self.call("partition_assignment_status", request_id)

    async def describe_quorum(self) -> QuorumInfo:
        return await self.call("describe_quorum")


async def child_main(fd: int, node_id: int) -> None:
    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    config, cluster_id = await _read(reader)
    keep_freed_batches_for_reuse(config.minibroker_log_heap_huge_pages)
    channel = RemoteControllerChannel(reader, writer)
    channel.start()
    seeded = config.seed is not None
    clock = Clock(config.wall_clock_base_ms if config.wall_clock_base_ms is not None
                  else SEEDED_WALL_BASE_MS if seeded else None)
    port = config.port + node_id - 1 if config.port else 0
    ids = IdSource((config.seed or 0) * 1000 + node_id, random_ids=config.seed is None)
    broker = Broker(node_id, config, clock, ids, channel, Faults(), port=port,
                    rack=config.rack_of(node_id),
                    credentials=store_for_users(config.users, IdSource(node_id + 7919).rng))
    broker.metadata.cluster_id = cluster_id
    broker.control_plane_sockets = True     # the controller is in another process
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)      # Ctrl-C reaches the whole group
    channel.closed.add_done_callback(lambda _: stop.set())
    try:
        await broker.start()
        broker.broker_epoch = await channel.call(
            "register_broker", node_id, broker.host, broker.port, broker.rack, broker.control_port,
            broker.registration_listeners())
        await stop.wait()
    finally:
        if broker.running:
            await broker.stop()
        writer.close()


# ---------------------------------------------------------------------------- the parent's side
class ChildBrokers:
    """Brokers 2..N of `cluster` (whose config says N) in child processes, served their
    controller calls; `start()` returns once every one registered. Made before the cluster
    starts: the cluster keeps (and starts) broker 1 only, with the controller."""

    # Restart back-off: doubled per death within RESTART_RESET_S of the last start, capped.
    RESTART_MIN_S, RESTART_MAX_S, RESTART_RESET_S = 0.5, 30.0, 60.0

    def __init__(self, cluster, restart: bool = True) -> None:
        for node_id in range(2, cluster.config.brokers + 1):
            del cluster.brokers[node_id]        # constructed, never started: no socket was opened
        self.cluster = cluster
        self.procs: dict[int, subprocess.Popen] = {}
        self.endpoints: dict[int, str] = {}
        self._registered: dict[int, asyncio.Future] = {}
        self._tasks: list[asyncio.Task] = []
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self.stopping = False
        self.restart = restart
        self.restarts: dict[int, int] = {}          # node id -> times started again
        self._started_at: dict[int, float] = {}
        self._backoff: dict[int, float] = {}

    async def start(self, timeout: float = 60.0) -> None:
        for node_id in range(2, self.cluster.config.brokers + 1):
            await self._spawn(node_id)
        await asyncio.wait_for(asyncio.gather(*self._registered.values()), timeout)

    async def _spawn(self, node_id: int) -> None:
        """Start broker `node_id`'s process and serve its controller calls."""
        loop = asyncio.get_running_loop()
        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.procs[node_id] = subprocess.Popen(
            [sys.executable, "-m", "minibroker.processes", str(theirs.fileno()), str(node_id),
             logging.getLevelName(logging.getLogger().level)],
            pass_fds=(theirs.fileno(),), env=env, start_new_session=False)
        theirs.close()
        self._started_at[node_id] = loop.time()
        reader, writer = await asyncio.open_connection(sock=ours)
        writer.write(_frame((self.cluster.config, self.cluster.cluster_id)))
        self._writers[node_id] = writer
        self._registered[node_id] = loop.create_future()
        self._tasks.append(loop.create_task(self._serve(node_id, reader, writer)))

    async def _serve(self, node_id: int, reader, writer) -> None:
        try:
            while True:
                call = await _read(reader)
                asyncio.get_running_loop().create_task(self._answer(node_id, writer, *call))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        if not self._registered[node_id].done():
            self._registered[node_id].set_exception(
                RuntimeError(f"broker {node_id}'s process ended before registering"))
        if self.stopping:
            return
        # The process is gone: fence its broker now, as an expired session would.
        code = await self._reap(node_id)
        log.warning("broker %d's process ended (%s); fencing it", node_id, code)
        await self.cluster.fence_broker(node_id)
        if self.restart:
            await self._restart(node_id)

    async def _reap(self, node_id: int) -> str:
        """Wait for the dead child's exit status (no <defunct> left behind)."""
        proc = self.procs[node_id]
        for _ in range(200):
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        else:
            proc.kill()
            proc.wait()
        rc = proc.returncode
        return f"signal {-rc}" if rc is not None and rc < 0 else f"exit status {rc}"

    async def _restart(self, node_id: int) -> None:
        loop = asyncio.get_running_loop()
        lived = loop.time() - self._started_at.get(node_id, 0.0)
        delay = self.RESTART_MIN_S if lived > self.RESTART_RESET_S else min(
            self.RESTART_MAX_S, self._backoff.get(node_id, self.RESTART_MIN_S / 2) * 2)
        self._backoff[node_id] = delay
        log.warning("starting broker %d's process again in %.1f s", node_id, delay)
        await asyncio.sleep(delay)
        if self.stopping:
            return
        self.restarts[node_id] = self.restarts.get(node_id, 0) + 1
        await self._spawn(node_id)

    async def _answer(self, node_id: int, writer, call_id: int, method: str, args, kw) -> None:
        try:
            if method == "register_broker":
                value = await self.cluster.channel._forward(lambda c: c.register_broker(*args, **kw))
                self.endpoints[node_id] = f"{args[1]}:{args[2]}"
                if not self._registered[node_id].done():
                    self._registered[node_id].set_result(None)
            elif method in CALLS:
                value = getattr(self.cluster.channel, method)(*args, **kw)
                value = await value
            else:
                raise ValueError(f"unknown controller call {method!r}")
            reply = (call_id, True, value)
        except Exception as e:  # noqa: BLE001 — the broker's caller gets it, as in process
            reply = (call_id, False, e)
        try:
            writer.write(_frame(reply))
        except Exception as e:  # noqa: BLE001 — an unpicklable answer: say so, do not hang
            writer.write(_frame((call_id, False, RuntimeError(f"{type(e).__name__}: {e}"))))

    def bootstrap(self, first: str) -> str:
        return ",".join([first] + [self.endpoints[i] for i in sorted(self.endpoints)])

    async def stop(self) -> None:
        self.stopping = True
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for w in self._writers.values():
            w.close()
        for p in self.procs.values():
            for _ in range(100):
                if p.poll() is not None:
                    break
                await asyncio.sleep(0.05)
            else:
                p.kill()
        for t in self._tasks:
            t.cancel()


def main() -> None:
    fd, node_id = int(sys.argv[1]), int(sys.argv[2])
    level = sys.argv[3] if len(sys.argv) > 3 else "WARNING"
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import uvloop
    except ImportError:
        asyncio.run(child_main(fd, node_id))
    else:
        uvloop.run(child_main(fd, node_id))


if __name__ == "__main__":
    main()
