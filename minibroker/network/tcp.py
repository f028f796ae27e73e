"""asyncio TCP server: one KafkaServerConnection per client socket.

The listener knows nothing of brokers: it is handed `handle(conn, frame)`, a callable returning the
coroutine that answers one request frame with the framed response buffers (or None: no response);
minibroker.broker.dispatch provides it. network/memory.py drives the same connection without a socket.

Requests on a connection are handled concurrently (a long-poll Fetch does not hold up a Produce),
but responses leave strictly in request order. State changes happen synchronously in handlers
before their first await, so requests on one connection still apply in arrival order.
"""
from __future__ import annotations

import asyncio
import collections
import logging
from typing import Any, Callable, Coroutine, Generator, Iterable

from minibroker.network.accept import INT32_MAX, Listener, listen
from minibroker.network.request_pool import RequestMemoryPool
from minibroker.network.sockopts import SocketTuning
from minibroker.protocol.framing import FrameReader, ProtocolViolation
from minibroker.security.principal import ANONYMOUS

# handle(conn, frame) -> a coroutine answering one request frame (see the module docstring).
Handle = Callable[[Any, memoryview], Coroutine[Any, Any, "list[Any] | None"]]

log = logging.getLogger("minibroker.network")

MAX_IN_FLIGHT = 128
# Response buffers collected from one read's requests before they are written (see _handle_frames).
WRITE_EVERY_PARTS = 32


class _Completed:
    """A request whose handler finished without suspending: quacks like a done Task."""
    __slots__ = ("_result", "_exc")

    def __init__(self, result: Any, exc: BaseException | None) -> None:
        self._result = result
        self._exc = exc

    def done(self) -> bool:
        return True

    def cancelled(self) -> bool:
        return isinstance(self._exc, asyncio.CancelledError)

    def exception(self) -> BaseException | None:
        return self._exc

    def result(self) -> Any:
        return self._result


class _Resume:
    """Continue a coroutine that was started by hand and suspended on `first` (what it yielded),
    under a Task: the Task waits on each yielded future and resumes the coroutine through here."""
    __slots__ = ("coro", "first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self.coro = coro
        self.first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self.coro, self.first
        self.first = None
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # noqa: BLE001 — cancellation: deliver it to the handler
                try:
                    value = coro.throw(e)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _resume(coro: Coroutine[Any, Any, Any], first: Any) -> Any:
    return await _Resume(coro, first)


class KafkaServerConnection(asyncio.BufferedProtocol):
    """Frames are received straight into the FrameReader's buffer (BufferedProtocol). Each request's
    handler coroutine is run eagerly: one that completes without suspending (most requests) costs
    no Task; one that suspends (long-poll Fetch, acks=all Produce) continues under a Task. Responses
    complete in order are collected and written with one writelines() per batch of received
    frames or per completed Task."""

    def __init__(self, handle: Handle, max_request_bytes: int,
                 connections: dict[KafkaServerConnection, None],
                 name: str = "server", pool: RequestMemoryPool | None = None,
                 listener: str = "PLAINTEXT",
                 principal_of: Callable[[Any], Any] | None = None) -> None:
        self.handle = handle
        self.connections = connections      # the server's open connections (closed on stop)
        self.name = name                    # for log lines, e.g. "broker 1"
        self.reader = FrameReader(max_request_bytes)
        self.reader.pool = pool             # queued.max.request.bytes (network/request_pool.py)
        self._waiting_for_pool = False
        # The loop calls it on every receive: one call less (mypy: a method replaced per instance).
        self.get_buffer = self.reader.get_buffer    # type: ignore[method-assign]
        # Tasks and _Completed, in order
        self.pending: collections.deque[asyncio.Task[Any] | _Completed] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.peer: Any = None               # get_extra_info's peername and sockname
        self.local: Any = None
        self.closed = False
        self._paused_reading = False
        self._write_paused = False
        self.tuning: SocketTuning | None = None
        # Set by authentication (SASL, a TLS client certificate); the listener's name is its
        # server's. Both reach every handler through RequestContext.
        self.principal = ANONYMOUS
        self.listener = listener
        self.principal_of = principal_of    # a TLS listener's: the client certificate's principal
        # A request failed before suspending: the connection closes once the responses queued
        # ahead of it are written; the frames after it are never executed (a client that retries
        # them would otherwise apply them twice).
        self._failed = False
        # Frames received but not yet handled because the client is not reading its responses
        # (the transport asked us to pause writing): Kafka mutes such a channel. They stay valid
        # (FrameReader never rewrites a buffer below its write position).
        self._deferred: collections.deque[memoryview] = collections.deque()

    def connection_made(self, transport: Any) -> None:
        self.loop = asyncio.get_running_loop()
        self.last_active = self.loop.time()
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.local = transport.get_extra_info("sockname")
        self.tuning = SocketTuning(transport)
        self.connections[self] = None
        if self.principal_of is not None:
            try:
                self.principal = self.principal_of(transport)
            except ValueError as e:     # no ssl.principal.mapping.rules rule applies
                self.close(f"failed authentication: {e}")

    def connection_lost(self, exc: BaseException | None) -> None:
        self.closed = True
        self.connections.pop(self, None)
        if self.reader.pool is not None:
            self.reader.release()
            self.reader.pool.forget(self._pool_has_room)

    def close(self, reason: str, level: int = logging.WARNING) -> None:
        """A WARNING by default: bad input or a failure; a broker stopping closes at DEBUG."""
        if not self.closed:
            log.log(level, "%s: closing connection from %s: %s", self.name, self.peer, reason)
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer(sizehint)     # replaced per instance by the reader's own

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:
            return
        self.last_active = self.loop.time()
        try:
            frames = self.reader.buffer_updated(nbytes)
        except ProtocolViolation as e:
            self.close(str(e))
            return
        if frames:
            self._handle_frames(frames)
        if self.reader.large_frames and not self.closed:
            assert self.tuning is not None, "set with the transport"
            self.tuning.quick_ack()
        if self.reader.waiting and not self._waiting_for_pool and not self.closed:
            assert self.reader.pool is not None, "only a pool makes a reader wait"
            self._waiting_for_pool = True       # no room for this request yet: stop reading
            self.reader.pool.wait(self._pool_has_room)
            self._update_reading()

    def _pool_has_room(self) -> None:
        self._waiting_for_pool = False
        self.reader.waiting = 0                 # tried again on the next receive
        self._update_reading()

    def data_received(self, data: bytes) -> None:
        """asyncio.Protocol form (tests may drive a connection by hand)."""
        self._receive(self.reader.feed, data)

    def frames_arrived(self, buf: bytearray) -> None:
        """network/memory.py's delivery: whole frames in a buffer handed over."""
        self._receive(self.reader.take, buf)

    def _receive(self, frames_of: Callable[[Any], Iterable[Any]], arg: Any) -> None:
        if self.closed:
            return
        self.last_active = self.loop.time()
        try:
            frames = frames_of(arg)
        except ProtocolViolation as e:
            self.close(str(e))
            return
        if frames:
            self._handle_frames(frames)

    def _handle_frames(self, frames: Iterable[memoryview]) -> None:
        if self._failed:
            return
        if self._deferred or self._write_paused:
            self._deferred.extend(frames)
            return
        assert self.transport is not None, "frames arrive only once connected"
        handle = self.handle
        pending = self.pending
        loop = None
        out: list[Any] | None = None    # responses ready while nothing is queued ahead, in order
        frames = iter(frames)
        for frame in frames:
            if out is not None and len(out) >= WRITE_EVERY_PARTS:
                # Written now, so that a client not reading its responses (pause_writing) stops
                # the handling of the rest of this read rather than piling up responses.
                self.transport.writelines(out)
                out = None
                if self._write_paused:
                    self._deferred.append(frame)
                    self._deferred.extend(frames)
                    break
            coro = handle(self, frame)
            try:
                first = coro.send(None)
            except StopIteration as stop:
                # The common case (a round trip's cold path runs every line here): nothing waits
                # ahead, so the response goes out without a place in the queue.
                if pending:
                    pending.append(_Completed(stop.value, None))
                elif stop.value is not None:
                    if out is None:
                        out = list(stop.value)  # never extend a handler's (possibly cached) list
                    else:
                        out += stop.value
                continue
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException as e:  # noqa: BLE001 — reported in order by _flush
                pending.append(_Completed(None, e))
                self._failed = True
                break
            if loop is None:
                loop = asyncio.get_running_loop()
            task = loop.create_task(_resume(coro, first))
            pending.append(task)
            task.add_done_callback(self._on_done)
        if out is not None and not self.closed:
            self.transport.writelines(out)
        if pending:
            self._flush()

    def _on_done(self, _task: asyncio.Task[Any]) -> None:
        self._flush()

    def _flush(self) -> None:
        """Write the responses of the requests at the head of the queue that are complete."""
        pending = self.pending
        out = None
        while pending and pending[0].done():
            task = pending.popleft()
            if self.closed:
                continue
            if task.cancelled():
                self._write(out)
                out = None
                self.close("request cancelled")
                continue
            exc = task.exception()
            if exc is not None:
                self._write(out)
                out = None
                if isinstance(exc, ProtocolViolation):
                    self.close(str(exc))
                else:
                    log.error("%s: handler failed", self.name, exc_info=exc)
                    self.close(f"internal error: {exc!r}")
                continue
            parts = task.result()
            if parts is not None:
                if out is None:
                    out = list(parts)      # never extend a handler's (possibly cached) list
                else:
                    out += parts
        self._write(out)
        self._update_reading()

    def _write(self, out: list[Any] | None) -> None:
        if out and not self.closed:
            assert self.transport is not None, "responses follow requests, once connected"
            self.transport.writelines(out)

    def _update_reading(self) -> None:
        if self.closed or self.transport is None:
            return
        want_pause = (self._write_paused or len(self.pending) >= MAX_IN_FLIGHT
                      or bool(self._deferred) or self._waiting_for_pool)
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
        if self._deferred and not self.closed:
            frames, self._deferred = self._deferred, collections.deque()
            self._handle_frames(frames)
        self._update_reading()


async def close_idle_connections(connections: dict[KafkaServerConnection, None],
                                 max_idle_ms: int) -> None:
    """Kafka's connections.max.idle.ms: close a connection that has sent nothing for that long
    and has no request in flight (a long-poll Fetch is not idle). Runs until cancelled."""
    loop = asyncio.get_running_loop()
    idle_s = max_idle_ms / 1000
    while True:
        await asyncio.sleep(min(idle_s / 4, 30.0))
        now = loop.time()
        for conn in list(connections):
            if not conn.pending and not conn.closed and now - conn.last_active >= idle_s:
                # Routine, not a fault: DEBUG, as Kafka's Selector logs it (peers reconnect).
                conn.close(f"idle for more than connections.max.idle.ms={max_idle_ms}",
                           logging.DEBUG)


ExceptionHandler = Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object]


class AcceptErrorLimiter:
    """The loop's exception handler while a listener runs: asyncio reports every failed accept
    past the fd limit ("socket.accept() out of system resource", with a traceback) and retries a
    second later, per listener; a broker past its fd limit flooded its log that way. Here one
    line per INTERVAL_S, counting those folded into it; anything else goes to the previous
    handler (or asyncio's default)."""
    INTERVAL_S = 10.0
    MESSAGE = "socket.accept() out of system resource"

    def __init__(self, previous: ExceptionHandler | None) -> None:
        self.previous = previous
        self.last = float("-inf")
        self.suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != self.MESSAGE:
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = loop.time()
        if now - self.last < self.INTERVAL_S:
            self.suppressed += 1
            return
        log.error("cannot accept connections: %r (%d more since the last report); retrying",
                  context.get("exception"), self.suppressed)
        self.last, self.suppressed = now, 0

    @classmethod
    def install(cls, loop: asyncio.AbstractEventLoop) -> None:
        if not isinstance(loop.get_exception_handler(), cls):
            loop.set_exception_handler(cls(loop.get_exception_handler()))


async def start_listener(handle: Handle, host: str, port: int, *, max_request_bytes: int,
                         connections: dict[KafkaServerConnection, None], name: str = "server",
                         max_connections: int = INT32_MAX,
                         max_connections_per_ip: int = INT32_MAX,
                         pool: RequestMemoryPool | None = None, listener: str = "PLAINTEXT",
                         ssl: Any = None, principal_of: Callable[[Any], Any] | None = None
                         ) -> Listener:
    """An accept loop of our own (network/accept.py: max.connections, max.connections.per.ip
    and a back-off when accept fails), with asyncio.Server's close / wait_closed / sockets;
    `pool`: queued.max.request.bytes (network/request_pool.py). `ssl`: an SSLContext
    (network/tls.py) for SSL and SASL_SSL listeners; `principal_of` gives a connection's
    principal from its transport once the handshake is done."""
    AcceptErrorLimiter.install(asyncio.get_running_loop())
    return await listen(
        lambda: KafkaServerConnection(handle, max_request_bytes, connections, name, pool,
                                      listener, principal_of),
        host, port,
        connections=connections, name=name, max_connections=max_connections,
        max_connections_per_ip=max_connections_per_ip, ssl=ssl)
