"""One broker process of `serve --processes`: a broker, a voter of the metadata quorum and, while
this voter leads, the active controller.

What it says to other processes goes over its direct links to them (mesh.py): the quorum's
messages (controller/raft.py) and controller calls, ("call", id, method, args, kw) answered
("reply", id, ok, value), among them each broker's heartbeat (processes/heartbeats.py). From the
supervisor's pipe come ("peers", ids, ports) each time the set of running broker processes
changes (how a process hears at once that another died, and where a restarted one listens);
a link from a peer that ends says the same without the supervisor.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import signal
import socket
from typing import Any

from minibroker.broker.broker import Broker
from minibroker.broker.faults import Faults
from minibroker.clock import SEEDED_WALL_BASE_MS, Clock
from minibroker.config import ClusterConfig
from minibroker.controller.controller import Controller
from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.metadata_store import MetadataStore
from minibroker.controller.quorum import METADATA_DIR
from minibroker.controller.quorum_state import QuorumStateStore
from minibroker.controller.raft import LEADER, RaftLog, RaftNode
from minibroker.controller.result import ControllerHalted, ControllerMoved
from minibroker.ids import IdSource
from minibroker.log.memory import keep_freed_batches_for_reuse
from minibroker.processes.channel import CALLS, PeerGone, RemoteControllerChannel
from minibroker.processes.frames import frame, read
from minibroker.processes.heartbeats import BrokerHeartbeatManager
from minibroker.processes.mesh import Mesh
from minibroker.security.credentials import SCRAM_MECHANISM_IDS, Upsertion, store_for_users

log = logging.getLogger("minibroker.processes")

RAFT_MESSAGES = frozenset({"vote", "voted", "append", "appended", "copy"})
# Calls a broker process makes of the active controller besides ControllerChannel's.
PROCESS_CALLS = frozenset({"register_broker", "broker_heartbeat"})
# How long a call to this process's controller waits for it to finish starting.
CONTROLLER_START_WAIT_S = 10.0


class ProcessNode:
    def __init__(self, node_id: int, config: ClusterConfig, cluster_id: str, restarted: bool,
                 writer: asyncio.StreamWriter, secret: bytes,
                 ports: dict[str, int] | None = None, metrics_port: int | None = None) -> None:
        """secret: what the processes' links prove they hold (mesh.py); ports: {listener name:
        port} this broker had before it was started again; metrics_port: where this broker's
        own Prometheus endpoint listens (None: none)."""
        self.node_id, self.config, self._writer = node_id, config, writer
        self.mesh = Mesh(node_id, secret, self._from_peer, self._joined, self._lost,
                         self._undeliverable)
        self.metrics_port = metrics_port
        self.metrics: Any = None            # minibroker.metrics.MetricsServer, with a port
        self.restarted = restarted
        seed = config.seed or 0
        self.clock = Clock(config.wall_clock_base_ms if config.wall_clock_base_ms is not None
                           else SEEDED_WALL_BASE_MS if config.seed is not None else None)
        self.nodes = list(range(1, config.brokers + 1))
        self.live: set[int] = set()
        port = config.port + node_id - 1 if config.port else 0
        self.channel = RemoteControllerChannel(self)
        self.broker = Broker(node_id, config, self.clock,
                             IdSource(seed * 1000 + node_id, random_ids=config.seed is None),
                             self.channel, Faults(), port=port, rack=config.rack_of(node_id),
                             credentials=store_for_users(config.users,
                                                         IdSource(node_id + 7919).rng),
                             listener_ports=ports)
        self.broker.metadata.cluster_id = cluster_id
        self.broker.control_plane_sockets = True   # the controller may be in another process
        metadata_dir = None if config.data_dir is None else os.path.join(
            config.data_dir, f"broker-{node_id}", METADATA_DIR)
        store = None if metadata_dir is None else MetadataStore(metadata_dir)
        # Restarted without its log and election state: it may lack records it acknowledged and
        # have voted in an epoch still deciding (controller/raft.py).
        self.raft = RaftNode(node_id, config.quorum_voters(), self.nodes, MetadataLog(store),
                             self._send, config.controller_quorum_election_timeout_ms,
                             random.Random(seed * 1000 + node_id), self.clock.now_ms,
                             forgot=restarted and metadata_dir is None,
                             state=None if metadata_dir is None else QuorumStateStore(metadata_dir))
        self.raft.on_leader = self._lead
        self.raft.on_resign = self._resign
        self.controller: Controller | None = None
        self.sessions: BrokerHeartbeatManager | None = None     # while the controller runs
        self._controller_ready = asyncio.Event()
        self._call_ids = itertools.count(1)
        self._pending: dict[int, tuple[int, asyncio.Future]] = {}
        self._tasks: list[asyncio.Task] = []

    # ------------------------------------------------------------------ the links
    def _send(self, dest: int, message: tuple) -> None:
        self.mesh.send(dest, message)

    def received(self, kind: str, who: Any, message: Any) -> None:
        """What the supervisor says: ("peers", running ids, {id: link port})."""
        if kind == "peers":
            self.mesh.set_addresses(message)
            self._peers(set(who))

    def _from_peer(self, who: int, message: tuple) -> None:
        if message[0] in RAFT_MESSAGES:
            self.raft.receive(who, message)
        elif message[0] == "call":
            self.spawn(self._answer(who, *message[1:]))
        elif message[0] == "reply":
            _, call_id, ok, value = message
            entry = self._pending.pop(call_id, None)
            if entry is not None and not entry[1].done():
                (entry[1].set_result if ok else entry[1].set_exception)(value)

    def _undeliverable(self, who: int, message: tuple) -> None:
        if message[0] == "call":
            self._fail_call(message[1], PeerGone(f"broker {who}'s process is not running"))

    def _joined(self, who: int) -> None:
        self.live.add(who)

    def _lost(self, who: int) -> None:
        """A peer's link ended: its process died (the supervisor may be gone to say so)."""
        self._peers(self.live - {who})

    def _peers(self, live: set[int]) -> None:
        died = sorted(self.live - live - {self.node_id})
        self.live = live
        for node in died:
            self.raft.peer_died(node)
            for call_id, (dest, _) in list(self._pending.items()):
                if dest == node:
                    self._fail_call(call_id, PeerGone(f"broker {node}'s process died"))
            if self.controller is not None:
                self.spawn(self._fence(self.controller, node))

    def _fail_call(self, call_id: int, error: Exception) -> None:
        entry = self._pending.pop(call_id, None)
        if entry is not None and not entry[1].done():
            entry[1].set_exception(error)

    def spawn(self, coro) -> None:
        self._tasks = [t for t in self._tasks if not t.done()]
        self._tasks.append(asyncio.get_running_loop().create_task(coro))

    # ------------------------------------------------------------------ the controller
    def _lead(self, epoch: int) -> None:
        self.spawn(self._start_controller(epoch))

    async def _start_controller(self, epoch: int) -> None:
        seed = self.config.seed or 0
        # Ids no earlier controller drew: the log's length and the epoch salt the seed.
        ids = IdSource(seed + (len(self.raft.log) << 32) + (epoch << 16),
                       random_ids=self.config.seed is None)
        ctl = Controller(RaftLog(self.raft, epoch), epoch, controller_id=self.node_id,
                         config=self.config, clock=self.clock, ids=ids,
                         fault_enabled=lambda site: False, on_halt=lambda c: None,
                         network=self.broker.faults.network)
        gone = tuple(n for n in self.nodes if n not in self.live and n != self.node_id)
        # Sessions start with the epoch and heartbeats count while the controller starts: a
        # broker stopped meanwhile is fenced a session timeout after this voter was elected,
        # however long the start waited on it.
        self.sessions = sessions = BrokerHeartbeatManager(
            ctl, self.clock.now_ms, self.config.broker_session_timeout_ms,
            self.config.broker_heartbeat_interval_ms)
        try:
            await ctl.start(gone)
        except ControllerHalted:
            pass
        if self.raft.role != LEADER or self.raft.epoch != epoch or not ctl.running:
            if self.sessions is sessions:
                self.sessions = None
            await ctl.stop()                    # lost the epoch while starting
            return
        log.info("broker %d is the active controller (epoch %d)", self.node_id, epoch)
        self.controller = ctl
        self.spawn(sessions.run())
        self._controller_ready.set()
        await self._record_users(ctl)

    def _resign(self) -> None:
        ctl, self.controller, self.sessions = self.controller, None, None
        self._controller_ready.clear()
        if ctl is not None:
            log.info("broker %d stops being the active controller", self.node_id)
            ctl.running = False                 # nothing more is written under its lock
            self.spawn(ctl.stop())

    async def _fence(self, ctl: Controller, node: int) -> None:
        try:
            await ctl.fence_broker(node)
        except (ControllerMoved, ControllerHalted):
            pass                                # the next controller fences it as it starts

    async def _record_users(self, ctl: Controller) -> None:
        """`--user`'s SCRAM credentials as records, once (as Cluster._record_users)."""
        known = ctl.image.scram_credentials
        creds = self.broker.credentials.scram
        upsertions = [Upsertion(user, SCRAM_MECHANISM_IDS[mech], cred)
                      for (user, mech), cred in sorted(creds.items())
                      if (user, SCRAM_MECHANISM_IDS[mech]) not in known]
        if upsertions:
            try:
                await ctl.alter_user_scram_credentials([], upsertions)
            except (ControllerMoved, ControllerHalted):
                pass                            # the next controller records them

    # ------------------------------------------------------------------ the channel's router
    def leader_id(self) -> int:
        return self.raft.leader_id

    async def leader_change(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self.raft.leader_change(), timeout)
        except asyncio.TimeoutError:
            pass

    async def local_call(self, method: str, args: tuple, kw: dict) -> Any:
        """`method` on this process's controller (ControllerMoved: this voter does not lead)."""
        if method == "describe_quorum":
            if self.raft.role != LEADER:
                raise ControllerMoved(self.node_id)
            return self.raft.describe()
        if method not in CALLS and method not in PROCESS_CALLS:
            raise ValueError(f"unknown controller call {method!r}")
        if method == "broker_heartbeat" and self.sessions is not None:
            return await self.sessions.heartbeat(*args)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONTROLLER_START_WAIT_S
        while self.controller is None:
            if self.raft.role != LEADER or loop.time() >= deadline:
                raise ControllerMoved(self.node_id)
            try:
                await asyncio.wait_for(self._controller_ready.wait(), 0.1)
            except asyncio.TimeoutError:
                pass
        ctl = self.controller
        if method == "broker_heartbeat":            # its sessions started with it
            return await self.sessions.heartbeat(*args) if self.sessions else True
        if method == "auto_create_topics":
            return await ctl.create_topics([(n, -1, -1, None, {}) for n in args[0]],
                                           validate_only=False)
        return await getattr(ctl, method)(*args, **kw)

    async def remote_call(self, dest: int, method: str, args: tuple, kw: dict) -> Any:
        call_id = next(self._call_ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[call_id] = (dest, fut)
        self._send(dest, ("call", call_id, method, args, kw))
        try:
            return await fut
        finally:
            self._pending.pop(call_id, None)        # given up on (a heartbeat), or answered

    async def _answer(self, src: int, call_id: int, method: str, args: tuple, kw: dict) -> None:
        try:
            reply = ("reply", call_id, True, await self.local_call(method, args, kw))
        except Exception as e:  # noqa: BLE001 — the caller gets it, as in process
            reply = ("reply", call_id, False, e)
        try:
            self._send(src, reply)
        except Exception as e:  # noqa: BLE001 — an unpicklable answer: say so, do not hang
            self._send(src, ("reply", call_id, False, RuntimeError(f"{type(e).__name__}: {e}")))

    # ------------------------------------------------------------------ the process
    async def run(self, reader: asyncio.StreamReader, stop: asyncio.Event) -> None:
        self._writer.write(frame(("link", await self.mesh.start())))
        self.spawn(self._pipe(reader))
        await self.broker.start()
        self.spawn(self.raft.run(first_boot=not self.restarted))
        await self._register()
        b = self.broker
        if self.metrics_port is not None:
            from minibroker.metrics import MetricsServer
            try:
                self.metrics = await MetricsServer(_NodeMetrics(self)).start(
                    self.config.host, self.metrics_port)
            except OSError as e:            # in use: this process ends, saying why
                log.error("broker %d: cannot serve metrics on %s port %d: %s", self.node_id,
                          self.config.host, self.metrics_port, e.strerror or e)
                raise SystemExit(1) from None
        # Clients' addresses and bound ports, to start again on; never the cluster listener's
        # (its peers learn a new one from the registration, and a port kept could be taken).
        self._writer.write(frame(("ready", b.client_endpoints(),
                                  {spec.name: spec.port for spec in b.listeners
                                   if spec.name != b.cluster_listener},
                                  None if self.metrics is None else self.metrics.port)))
        self.spawn(self._heartbeats())
        await stop.wait()

    async def _register(self) -> None:
        b = self.broker
        b.broker_epoch = await self.channel.call(
            "register_broker", self.node_id, b.host, b.port, b.rack, b.control_port,
            b.registration_listeners())

    async def _heartbeats(self) -> None:
        """KRaft's BrokerLifecycleManager: a heartbeat to the active controller each
        broker.heartbeat.interval.ms (heartbeats.py); registered again if the controller no
        longer knows this broker's epoch. Not through the channel, which waits for an answer
        from a controller's process however long it is stopped: one not answered within the
        interval is given up, and the next goes to the voter leading by then."""
        interval = self.config.broker_heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            leader, args = self.raft.leader_id, (self.node_id, self.broker.broker_epoch)
            try:
                if leader < 0:
                    continue
                if leader == self.node_id:
                    known = await self.local_call("broker_heartbeat", args, {})
                else:
                    known = await asyncio.wait_for(
                        self.remote_call(leader, "broker_heartbeat", args, {}), interval)
                if not known:
                    log.info("broker %d: its registration is stale: registering again",
                             self.node_id)
                    await self._register()
            except Exception as e:  # noqa: BLE001 — no controller now: the next one is tried
                log.info("broker %d: heartbeat to %d not answered: %r", self.node_id, leader, e)

    async def _pipe(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                kind, who, message = await read(reader)
                self.received(kind, who, message)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        # The quorum and the brokers' links need no supervisor: this process serves on (a
        # process that dies now is not started again). SIGTERM or SIGINT stops it.
        log.warning("broker %d: the supervisor's process went away: serving on without it "
                    "(a broker process that dies is no longer started again)", self.node_id)

    async def close(self) -> None:
        if self.metrics is not None:
            await self.metrics.stop()
        if self.controller is not None:
            await self.controller.stop()
        if self.broker.running:
            await self.broker.stop()
        for t in self._tasks:
            t.cancel()
        await self.mesh.close()
        self._writer.close()


class _NodeMetrics:
    """What minibroker.metrics reads of a Cluster, for this process's one broker: each broker
    process serves its own endpoint, as each Kafka broker has its own JMX exporter."""

    def __init__(self, node: ProcessNode) -> None:
        self.node = node
        self.brokers = {node.node_id: node.broker}

    @property
    def controller(self) -> Controller | None:
        return self.node.controller             # set while this process's voter leads

    @property
    def controller_node_id(self) -> int:
        return self.node.node_id if self.node.controller is not None else self.node.raft.leader_id


async def child_main(fd: int, node_id: int) -> None:
    reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
    _, config, cluster_id, restarted, ports, metrics_port, secret = await read(reader)
    keep_freed_batches_for_reuse(config.minibroker_log_heap_huge_pages)
    node = ProcessNode(node_id, config, cluster_id, restarted, writer, secret, ports,
                       metrics_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)      # Ctrl-C reaches the whole group
    try:
        await node.run(reader, stop)
    finally:
        await node.close()
