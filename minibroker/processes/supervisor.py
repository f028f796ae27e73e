"""The parent of `serve --processes`: starts brokers 1..N each in its own process, tells them
where the others' links listen, and starts again one that died. It holds no broker and no
controller, and nothing between the processes passes through it (mesh.py): if it dies, they
serve on, without restarts.

Each child gets one end of a socketpair (nothing listens: only the supervisor and that child hold
it), and over it the config, its ports and the mesh secret. A child says ("link", port) once its
link listener is up and ("ready", ...) once registered; every child is told ("peers", ids,
{id: link port}) whenever the set of running processes changes, which is how the quorum hears
at once that a voter's process died and where one started again listens.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys

from minibroker.config import ClusterConfig
from minibroker.ids import IdSource, random_cluster_id
from minibroker.log.config import broker_defaults
from minibroker.log.meta_properties import stored_cluster_id
from minibroker.processes.frames import frame, read

log = logging.getLogger("minibroker.processes")


def cluster_id_for(config: ClusterConfig) -> str:
    """The cluster id a Cluster of `config` would have (the seed's first draw, else random; a data
    directory's own), without loading a broker here. ValueError: a config no broker takes."""
    broker_defaults(config.describe())      # a log.* override's value, as a Broker would refuse it
    seeded = config.seed is not None
    drawn = IdSource(config.seed or 0).cluster_id()
    cluster_id = config.cluster_id or (drawn if seeded else random_cluster_id())
    if config.data_dir is not None:
        cluster_id = stored_cluster_id(config.data_dir, config.brokers, cluster_id)
    return cluster_id


class Supervisor:
    """`start()` returns once every broker process registered with the controller."""

    # Restart back-off: doubled per death within RESTART_RESET_S of the last start, capped.
    RESTART_MIN_S, RESTART_MAX_S, RESTART_RESET_S = 0.5, 30.0, 60.0

    def __init__(self, config: ClusterConfig, cluster_id: str, restart: bool = True,
                 metrics_port: int | None = None) -> None:
        """metrics_port: broker i's Prometheus endpoint listens on metrics_port + i - 1 (0: each
        on a free port); None: none."""
        self.config, self.cluster_id = config, cluster_id
        self.metrics_port = metrics_port
        self.metrics_ports: dict[int, int] = {}     # node id -> its endpoint's bound port
        self.procs: dict[int, subprocess.Popen] = {}
        self.endpoints: dict[int, str] = {}
        # node id -> {listener name: host:port} / {listener name: bound port}, clients' listeners.
        self.listener_endpoints: dict[int, dict[str, str]] = {}
        self.ports: dict[int, dict[str, int]] = {}
        self._registered: dict[int, asyncio.Future] = {}
        self._tasks: list[asyncio.Task] = []
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self.stopping = False
        self.restart = restart
        self.restarts: dict[int, int] = {}          # node id -> times started again
        self._started_at: dict[int, float] = {}
        self._backoff: dict[int, float] = {}
        self.links: dict[int, int] = {}             # node id -> its link listener's port
        self._secret = secrets.token_bytes(32)      # what the links prove they hold

    async def start(self, timeout: float = 60.0) -> None:
        for node_id in range(1, self.config.brokers + 1):
            await self._spawn(node_id, restarted=False)
        await asyncio.wait_for(asyncio.gather(*self._registered.values()), timeout)

    async def _spawn(self, node_id: int, restarted: bool) -> None:
        """Start broker `node_id`'s process and relay what it says."""
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
        # Started again: on the ports it had (with --port 0 too), so clients' bootstrap lists
        # and cached addresses stay good.
        metrics_port = None if self.metrics_port is None else self.metrics_ports.get(
            node_id, self.metrics_port + node_id - 1 if self.metrics_port else 0)
        writer.write(frame(("init", self.config, self.cluster_id, restarted,
                            self.ports.get(node_id, {}), metrics_port, self._secret)))
        self._writers[node_id] = writer
        self._registered[node_id] = loop.create_future()
        self._tasks.append(loop.create_task(self._serve(node_id, reader)))
        self._tell_peers()

    def _tell_peers(self) -> None:
        live = tuple(sorted(self._writers))
        links = {n: self.links[n] for n in live if n in self.links}
        for w in self._writers.values():
            w.write(frame(("peers", live, links)))

    async def _serve(self, node_id: int, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                message = await read(reader)
                if message[0] == "link":
                    self.links[node_id] = message[1]
                    self._tell_peers()
                elif message[0] == "ready":
                    _, self.listener_endpoints[node_id], self.ports[node_id], metrics = message
                    self.endpoints[node_id] = next(iter(message[1].values()))
                    if metrics is not None:
                        self.metrics_ports[node_id] = metrics
                    if not self._registered[node_id].done():
                        self._registered[node_id].set_result(None)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        self._writers.pop(node_id, None)
        self.links.pop(node_id, None)
        if not self._registered[node_id].done():
            self._registered[node_id].set_exception(
                RuntimeError(f"broker {node_id}'s process ended before registering"))
        if self.stopping:
            return
        self._tell_peers()                      # the others fence it, or elect a new leader
        code = await self._reap(node_id)
        log.warning("broker %d's process ended (%s)", node_id, code)
        if self.restart:
            await self._restart(node_id)

    async def _reap(self, node_id: int) -> str:
        """Wait for the dead child's exit status (no <defunct> left behind)."""
        proc = self.procs[node_id]
        await _exited(proc, 10.0)
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
        await self._spawn(node_id, restarted=True)

    def bootstrap(self) -> str:
        """Each broker's first client listener (the inter-broker one, unless only brokers use
        it)."""
        return ",".join(self.endpoints[i] for i in sorted(self.endpoints))

    def client_listeners(self) -> list[str]:
        """The names of the listeners clients use, as broker 1 reported them."""
        return list(self.listener_endpoints.get(1, {}))

    def bootstrap_for(self, listener: str) -> str:
        """The brokers' addresses on the listener named `listener`."""
        return ",".join(self.listener_endpoints[i][listener]
                        for i in sorted(self.listener_endpoints)
                        if listener in self.listener_endpoints[i])

    async def stop(self) -> None:
        self.stopping = True
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            await _exited(p, 5.0)
        for w in self._writers.values():
            w.close()
        for t in self._tasks:
            t.cancel()


async def _exited(proc: subprocess.Popen, seconds: float) -> None:
    """Until `proc` exited (reaped: no <defunct> left behind); killed after `seconds`."""
    for _ in range(int(seconds / 0.05)):
        if proc.poll() is not None:
            return
        await asyncio.sleep(0.05)
    proc.kill()
    proc.wait()
