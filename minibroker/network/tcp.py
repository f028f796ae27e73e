"""asyncio TCP server: one KafkaServerConnection per client socket.

Requests on a connection are handled concurrently (a long-poll Fetch does not hold up a Produce),
but responses leave strictly in request order. State changes happen synchronously in handlers
before their first await, so requests on one connection still apply in arrival order.
"""
from __future__ import annotations

import asyncio
import collections
import logging
from typing import TYPE_CHECKING

from minibroker.broker.dispatch import dispatch
from minibroker.protocol.framing import FrameReader, ProtocolViolation

if TYPE_CHECKING:
    from minibroker.broker.broker import Broker

log = logging.getLogger("minibroker.network")

MAX_IN_FLIGHT = 128


class KafkaServerConnection(asyncio.Protocol):
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.reader = FrameReader(broker.config.socket_request_max_bytes)
        self.pending: collections.deque[asyncio.Task] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.peer = None
        self.closed = False
        self._paused_reading = False
        self._write_paused = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.broker.connections.add(self)

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.broker.connections.discard(self)

    def close(self, reason: str) -> None:
        if not self.closed:
            log.warning("broker %d: closing connection from %s: %s",
                        self.broker.node_id, self.peer, reason)
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            frames = self.reader.feed(data)
        except ProtocolViolation as e:
            self.close(str(e))
            return
        loop = asyncio.get_running_loop()
        for frame in frames:
            task = loop.create_task(dispatch(self.broker, self, frame))
            self.pending.append(task)
            task.add_done_callback(self._on_done)
        self._update_reading()

    def _on_done(self, _task: asyncio.Task) -> None:
        pending = self.pending
        while pending and pending[0].done():
            task = pending.popleft()
            if self.closed:
                continue
            if task.cancelled():
                self.close("request cancelled")
                continue
            exc = task.exception()
            if exc is not None:
                if isinstance(exc, ProtocolViolation):
                    self.close(str(exc))
                else:
                    log.error("broker %d: handler failed", self.broker.node_id, exc_info=exc)
                    self.close(f"internal error: {exc!r}")
                continue
            parts = task.result()
            if parts is not None:
                self.transport.writelines(parts)
        self._update_reading()

    def _update_reading(self) -> None:
        if self.closed or self.transport is None:
            return
        want_pause = self._write_paused or len(self.pending) >= MAX_IN_FLIGHT
        if want_pause and not self._paused_reading:
            self.transport.pause_reading()
            self._paused_reading = True
        elif not want_pause and self._paused_reading:
            self.transport.resume_reading()
            self._paused_reading = False

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()


async def start_listener(broker: "Broker", host: str, port: int) -> asyncio.base_events.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: KafkaServerConnection(broker), host, port,
                                    reuse_address=True, backlog=1024)
