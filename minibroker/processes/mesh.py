"""The broker processes' direct links: the quorum's messages and controller calls go from process
to process over loopback TCP, not through the supervisor, so the processes keep their quorum
when the supervisor dies (KRaft's combined mode has no process above the brokers).

Each process listens on 127.0.0.1 (a port of its own, told to the others by the supervisor) and
sends to each peer over one connection it opened; it reads what a peer sends on the connection
that peer opened. Frames are pickled (frames.py), so nothing is read from a connection before it
proves it holds the cluster's mesh secret (32 random bytes the supervisor hands each process
over its private socketpair): the listener sends a nonce, the connecting process answers with
its node id, its own nonce and HMAC-SHA256(secret, both nonces and the id), and the listener
proves itself back the same way before anything is sent to it. A connection that fails to
prove itself is closed with a log line, unread. A connection opened by a peer that ends says
that peer's process died (loopback: the kernel closes a killed process's sockets at once).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import struct
from collections.abc import Callable
from typing import Any

from minibroker.processes.frames import frame, read

log = logging.getLogger("minibroker.processes")

HOST = "127.0.0.1"          # the processes share a machine: nothing else need reach this
NONCE = 32
_ID = struct.Struct(">i")
HELLO_TIMEOUT_S = 5.0       # a connection that does not prove itself in this is closed
CONNECT_TIMEOUT_S = 5.0
MAX_QUEUED = 10_000         # messages held for a peer while its connection opens
MAX_UNPROVEN = 32           # connections still to prove themselves; more are closed at once


def _proof(secret: bytes, who: bytes, *parts: bytes) -> bytes:
    return hmac.new(secret, who + b"".join(parts), hashlib.sha256).digest()


class Mesh:
    """on_message(peer, message); on_joined(peer) / on_lost(peer): a peer's connection to this
    process proved itself / ended; undeliverable(peer, message): a message that could not be
    sent (no address for that peer, or its connection could not be opened)."""

    def __init__(self, node_id: int, secret: bytes, on_message: Callable[[int, Any], None],
                 on_joined: Callable[[int], None], on_lost: Callable[[int], None],
                 undeliverable: Callable[[int, Any], None]) -> None:
        if len(secret) < 16:
            raise ValueError("a link secret is at least 16 random bytes")
        self.node_id, self._secret = node_id, secret
        self._on_message, self._on_joined, self._on_lost = on_message, on_joined, on_lost
        self._undeliverable = undeliverable
        self.port = 0
        self._server: asyncio.Server | None = None
        self.addresses: dict[int, int] = {}                 # peer -> its listener's port
        self._out: dict[int, asyncio.StreamWriter] = {}     # peer -> the connection to it
        self._queued: dict[int, list[Any]] = {}             # peer -> sent while it opens
        self._in: dict[int, object] = {}                    # peer -> its current connection
        self._tasks: set[asyncio.Task] = set()
        self._unproven = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accepted, HOST, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def set_addresses(self, addresses: dict[int, int]) -> None:
        """Each peer's port, as the supervisor last told it: a peer on a new port was started
        again, so a connection to its old one is dropped."""
        for peer, port in addresses.items():
            if peer != self.node_id and self.addresses.get(peer) != port:
                self.addresses[peer] = port
                w = self._out.pop(peer, None)
                if w is not None:
                    w.close()

    def send(self, dest: int, message: Any) -> None:
        w = self._out.get(dest)
        if w is not None and not w.is_closing():
            w.write(frame(message))
            return
        queued = self._queued.get(dest)
        if queued is not None:                              # opening already
            if len(queued) < MAX_QUEUED:
                queued.append(message)
            else:
                self._undeliverable(dest, message)
            return
        if dest not in self.addresses:
            self._undeliverable(dest, message)
            return
        self._queued[dest] = [message]
        self._spawn(self._connect(dest, self.addresses[dest]))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, dest: int, port: int) -> None:
        writer = None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(HOST, port), CONNECT_TIMEOUT_S)
            theirs = await asyncio.wait_for(reader.readexactly(NONCE), HELLO_TIMEOUT_S)
            ours, me = os.urandom(NONCE), _ID.pack(self.node_id)
            writer.write(me + ours + _proof(self._secret, b"client", theirs, ours, me))
            answer = await asyncio.wait_for(reader.readexactly(32), HELLO_TIMEOUT_S)
            if not hmac.compare_digest(answer, _proof(self._secret, b"server", ours, theirs,
                                                      _ID.pack(dest))):
                raise ConnectionError("it did not prove it holds the mesh secret")
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            log.info("broker %d: no connection to broker %d's process on port %d: %r",
                     self.node_id, dest, port, e)
            if writer is not None:
                writer.close()
            for message in self._queued.pop(dest, []):
                self._undeliverable(dest, message)
            return
        queued = self._queued.pop(dest, [])
        if self.addresses.get(dest) != port:                # started again meanwhile
            writer.close()
            for message in queued:
                self._undeliverable(dest, message)
            return
        for message in queued:
            writer.write(frame(message))
        self._out[dest] = writer
        self._spawn(self._watch(dest, reader, writer))

    async def _watch(self, dest: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        """Nothing comes back on a connection this process opened: its end is the peer's."""
        try:
            while await reader.read(1 << 16):
                pass
        except OSError:
            pass
        if self._out.get(dest) is writer:
            del self._out[dest]
        writer.close()

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
                        ) -> None:
        where = writer.get_extra_info("peername")
        if self._unproven >= MAX_UNPROVEN:
            log.warning("broker %d: closed a connection to its process link from %s: %d others "
                        "have yet to prove themselves", self.node_id, where, self._unproven)
            writer.close()
            return
        self._unproven += 1
        ours = os.urandom(NONCE)
        try:
            writer.write(ours)
            hello = await asyncio.wait_for(reader.readexactly(_ID.size + NONCE + 32),
                                           HELLO_TIMEOUT_S)
            me, theirs, proof = hello[:4], hello[4:4 + NONCE], hello[4 + NONCE:]
            if not hmac.compare_digest(proof, _proof(self._secret, b"client", ours, theirs, me)):
                log.warning("broker %d: closed a connection to its process link from %s: it "
                            "did not prove it holds the mesh secret", self.node_id, where)
                writer.close()
                return
            writer.write(_proof(self._secret, b"server", theirs, ours, _ID.pack(self.node_id)))
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            log.warning("broker %d: closed a connection to its process link from %s before it "
                        "proved itself: %r", self.node_id, where, e)
            writer.close()
            return
        finally:
            self._unproven -= 1
        (peer,) = _ID.unpack(me)
        token = self._in[peer] = object()
        self._on_joined(peer)
        try:
            while True:
                self._on_message(peer, await read(reader))
        except (OSError, asyncio.IncompleteReadError):
            pass
        except Exception:  # noqa: BLE001 — said, and that link closed: the process goes on
            log.exception("broker %d: closed its link from broker %d", self.node_id, peer)
        finally:
            writer.close()
            if self._in.get(peer) is token:                 # not one that replaced it
                del self._in[peer]
                self._on_lost(peer)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in self._out.values():
            w.close()
        for t in list(self._tasks):
            t.cancel()
