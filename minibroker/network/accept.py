"""A listening socket with an accept loop of our own, as Kafka's Acceptor: bounds on connections
and a back-off when accept fails.

asyncio's and uvloop's servers accept whenever the socket is readable. Past the process's file
descriptor limit uvloop accepts and closes at once (libuv's reserved-fd trick), so every client
retry costs the broker an accept and a close: a reconnecting client kept a broker at 100% of a
core (~63k failed accepts/s). Here a failed accept (EMFILE, ENFILE, ENOBUFS, ENOMEM) stops
accepting for a back-off (50 ms doubling to 1 s), and pending connections wait in the kernel's
backlog, as in Kafka; one log line per 10 s counts them.

- `max.connections` (Kafka's default: int32 max): past it the loop does not accept until a
  connection closes (Kafka's Acceptor blocks the same way). Only the client listener counts;
  the control plane is always served (Kafka exempts the inter-broker listener).
- `max.connections.per.ip` (int32 max): a connection over it is accepted and closed with a log
  line (Kafka's TooManyConnectionsException).
"""
from __future__ import annotations

import asyncio
import errno
import ipaddress
import logging
import socket
import ssl as ssl_module
from typing import Any, Callable, Collection, Protocol

from minibroker.network.ssl_transport import accept_tls

log = logging.getLogger("minibroker.network")

INT32_MAX = 2**31 - 1
OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
FIRST_BACKOFF_S, MAX_BACKOFF_S = 0.05, 1.0
REPORT_EVERY_S = 10.0
HANDSHAKE_TIMEOUT_S = 10.0
SLOT_POLL_S = 0.05              # how often a listener at max.connections looks for a free slot


def _family(host: str) -> int:
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return socket.AF_INET   # a name ("localhost"): bound as IPv4, as the README serves


class Connection(Protocol):
    """What a listener reads of the connections it counts (tcp.KafkaServerConnection)."""

    @property
    def peer(self) -> Any: ...          # get_extra_info("peername"): (host, port, ...) or None
    @property
    def closed(self) -> bool: ...


class Listener:
    """What broker.py uses of an asyncio.Server: `sockets`, `close()`, `wait_closed()`."""

    def __init__(self, sock: socket.socket, factory: Callable[[], Any],
                 connections: Collection[Connection],
                 name: str, max_connections: int, max_connections_per_ip: int,
                 ssl: Any = None) -> None:
        self.sockets = [sock]
        self.factory = factory
        self.connections = connections      # the broker's, all listeners' (per-IP counts)
        self.accepted: set[Connection] = set()  # this listener's open connections (max.connections)
        self.name = name
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.ssl = ssl                  # TLS listeners: each handshake runs in a task of its own
        self._handshakes: set[asyncio.Task[None]] = set()
        self.failed_accepts = 0         # accepts that failed (out of descriptors), in all
        self.refused_per_ip = 0
        self._unreported = 0
        self._last_report = float("-inf")
        self._task = asyncio.get_running_loop().create_task(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        sock = self.sockets[0]
        backoff = FIRST_BACKOFF_S
        while True:
            while self._open() >= self.max_connections:
                await asyncio.sleep(SLOT_POLL_S)
            try:
                conn, addr = await loop.sock_accept(sock)
            except OSError as e:
                if e.errno not in OUT_OF_RESOURCES:
                    continue            # ECONNABORTED and the like: that client's problem
                self._accept_failed(loop, e)
                await asyncio.sleep(backoff)
                backoff = min(2 * backoff, MAX_BACKOFF_S)
                continue
            backoff = FIRST_BACKOFF_S
            if self.max_connections_per_ip < INT32_MAX and self._over_per_ip(addr[0]):
                conn.close()
                continue
            if self.ssl is not None:    # a slow handshake must not hold up the next accept
                task = loop.create_task(self._connect(loop, conn))
                self._handshakes.add(task)
                task.add_done_callback(self._handshakes.discard)
            else:
                await self._connect(loop, conn)

    async def _connect(self, loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
        try:
            protocol: Any
            if self.ssl is not None:
                protocol = (await accept_tls(loop, conn, self.ssl, self.factory,
                                             HANDSHAKE_TIMEOUT_S)).get_protocol()
            else:
                _, protocol = await loop.connect_accepted_socket(self.factory, conn)
            if self.max_connections < INT32_MAX:
                self.accepted.add(protocol)
        except (OSError, ssl_module.SSLError, asyncio.TimeoutError) as e:
            # The client went before we got to it, or its TLS handshake failed.
            log.debug("%s: dropped an accepted connection: %r", self.name, e)
            conn.close()

    def _open(self) -> int:
        if len(self.accepted) >= self.max_connections:
            self.accepted = {c for c in self.accepted if not c.closed}
        return len(self.accepted)

    def _over_per_ip(self, ip: str) -> bool:
        n = sum(1 for c in self.connections if c.peer is not None and c.peer[0] == ip)
        if n < self.max_connections_per_ip:
            return False
        self.refused_per_ip += 1
        log.warning("%s: closing a connection from %s: it has %d, max.connections.per.ip=%d",
                    self.name, ip, n, self.max_connections_per_ip)
        return True

    def _accept_failed(self, loop: asyncio.AbstractEventLoop, e: OSError) -> None:
        self.failed_accepts += 1
        now = loop.time()
        if now - self._last_report < REPORT_EVERY_S:
            self._unreported += 1
            return
        log.error("%s: cannot accept connections: %r (%d more since the last report); "
                  "backing off", self.name, e, self._unreported)
        self._last_report, self._unreported = now, 0

    def close(self) -> None:
        self._task.cancel()
        for task in self._handshakes:
            task.cancel()
        self.sockets[0].close()

    async def wait_closed(self) -> None:
        await asyncio.gather(self._task, return_exceptions=True)


async def listen(factory: Callable[[], Any], host: str, port: int, *,
                 connections: Collection[Connection],
                 name: str, max_connections: int = INT32_MAX,
                 max_connections_per_ip: int = INT32_MAX, backlog: int = 1024,
                 ssl: Any = None) -> Listener:
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return Listener(sock, factory, connections, name, max_connections, max_connections_per_ip,
                    ssl)
