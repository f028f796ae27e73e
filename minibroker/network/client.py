"""A pipelined Kafka client connection: many requests in flight, responses matched in order.

Used by the controller (LeaderAndIsr/UpdateMetadata/StopReplica to brokers), by followers'
replica fetchers, and by the reference client in minibroker.client.

KIP-368: a connection given a `reauth` (network/sasl_client.SessionReauth) re-authenticates
between requests once that says it is due: the request that finds it due and every one after
it wait, the responses already owed arrive, the SASL exchange runs alone on the connection,
then the waiting requests go out in order. A failed exchange closes the connection and fails
the waiting requests with its error.
"""
from __future__ import annotations

import asyncio
import collections
import struct
import sys
from typing import Any, Callable, Iterable, Protocol

from kafka.protocol.api_header import ResponseClassRegistry

from minibroker.network.sockopts import SocketTuning
from minibroker.protocol.fast import _skip_tags
from minibroker.protocol.framing import FrameReader, ProtocolViolation
from minibroker.protocol.gathered import Gathered

_I32 = struct.Struct(">i")
_RAW_GATHERED = 2       # an inflight entry's `raw` for send_encoded(gathered=True)
_REQ_HDR = struct.Struct(">hhih")


class ConnectionClosed(ConnectionError):
    pass


class Reauthentication(Protocol):
    """When and how a connection re-authenticates (KIP-368)."""

    def due(self) -> bool: ...

    async def __call__(self, conn: KafkaClientConnection) -> None:
        """Run the exchange on `conn` (its requests pass `authenticating=True`); raise on failure."""


def response_class_for(req: Any) -> Any:
    """XRequest → XResponse from the same module; an extended stock request (XRequestKip253)
    → kafka-python's stock response for its api key."""
    name = type(req).__name__
    mod = sys.modules[type(req).__module__]
    cls = getattr(mod, name.replace("Request", "Response", 1), None)
    if cls is None:
        cls = ResponseClassRegistry._response_class_registry[req.API_KEY]
    return cls[None] if getattr(cls, "_class_version", None) is not None else cls


def encode_request(req: Any, version: int, correlation_id: int, client_id: str) -> list[bytes]:
    cls = type(req)
    flexible = cls.flexible_version_q(version) or (cls.API_KEY == 18 and version >= 3)
    cid = client_id.encode()
    hdr = _REQ_HDR.pack(cls.API_KEY, version, correlation_id, len(cid)) + cid
    if flexible:
        hdr += b"\x00"
    body = req.encode(version=version)
    return [_I32.pack(len(hdr) + len(body)), hdr, body]


class KafkaClientConnection(asyncio.BufferedProtocol):
    def __init__(self, client_id: str = "minibroker", max_frame_bytes: int = 1 << 30) -> None:
        self.client_id = client_id
        self.reader = FrameReader(max_frame_bytes)
        self.transport: asyncio.Transport | None = None
        # (correlation id, response class, version, future, raw: bool or _RAW_GATHERED)
        self.inflight: collections.deque[tuple[int, Any, int, asyncio.Future[Any], int]] = \
            collections.deque()
        self._corr = 0
        self.closed = False
        self.close_reason: str | None = None
        self._drain_waiter: asyncio.Future[None] | None = None
        self._write_paused = False
        self.tuning: SocketTuning | None = None
        self.reauth: Reauthentication | None = None
        # While re-authenticating: the requests waiting (their future, then the write that sends
        # them), the task, and a waiter for the responses owed before the exchange starts.
        self._held: collections.deque[tuple[asyncio.Future[Any], Callable[[], None]]] | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self._idle: asyncio.Future[None] | None = None

    @classmethod
    async def connect(cls, host: str, port: int, client_id: str = "minibroker",
                      timeout: float = 10.0, ssl: Any = None) -> "KafkaClientConnection":
        """ssl: an ssl.SSLContext for a TLS listener (security.protocol=SSL), else plaintext."""
        loop = asyncio.get_running_loop()
        tls = {"ssl": ssl, "server_hostname": host} if ssl is not None else {}
        _, proto = await asyncio.wait_for(
            loop.create_connection(lambda: cls(client_id), host, port, **tls), timeout)
        return proto

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.tuning = SocketTuning(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        self._fail(ConnectionClosed(self.close_reason or f"connection lost: {exc!r}"))

    def _fail(self, exc: Exception) -> None:
        self.closed = True
        while self.inflight:
            fut = self.inflight.popleft()[3]
            if not fut.done():
                fut.set_exception(exc)
        self._fail_held(exc)
        for waiter in (self._drain_waiter, self._idle):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    def _fail_held(self, exc: Exception) -> None:
        held, self._held = self._held, None
        for fut, _ in held or ():
            if not fut.done():
                fut.set_exception(exc)

    def close(self, reason: str = "closed by client") -> None:
        if not self.closed:
            self.close_reason = reason
            self.closed = True
            if self.transport is not None:
                self.transport.close()
            self._fail(ConnectionClosed(reason))

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    async def drain(self) -> None:
        if self._write_paused and not self.closed:
            self._drain_waiter = asyncio.get_running_loop().create_future()
            await self._drain_waiter

    def send(self, req: Any, version: int, response_class: Any = None,
             raw: bool = False, authenticating: bool = False) -> asyncio.Future[Any]:
        """Queue a request; the future resolves to the decoded response (None for acks=0).

        raw=True: it resolves to the response body instead (a read-only memoryview of the frame
        after the response header), for a caller with its own decoder. The view points into the
        receive buffer, which is reused only once no view of it is left: drop it (and the future)
        as soon as it is handled.

        authenticating=True: a request of the connection's own SASL exchange, never held back
        by a re-authentication (it is one)."""
        fut = self._future()
        if not fut.done():
            if not authenticating and (self._held is not None or self.reauth is not None) \
                    and self._must_wait():
                assert self._held is not None, "_must_wait() made the queue"
                self._held.append((fut, lambda: self._write(fut, req, version, response_class,
                                                            raw)))
            else:
                self._write(fut, req, version, response_class, raw)
        return fut

    def _write(self, fut: asyncio.Future[Any], req: Any, version: int, response_class: Any,
               raw: bool) -> None:
        corr = self._corr = (self._corr + 1) & 0x7FFFFFFF
        assert self.transport is not None, "requests are sent once connected"
        self.transport.writelines(encode_request(req, version, corr, self.client_id))
        if not req.expect_response():
            fut.set_result(None)
            return
        rcls = response_class or response_class_for(req)
        self.inflight.append((corr, rcls, version, fut, raw))

    def _future(self) -> asyncio.Future[Any]:
        """A request's future; already failed with ConnectionClosed when the connection is."""
        fut = asyncio.get_running_loop().create_future()
        if self.closed:
            fut.set_exception(ConnectionClosed(self.close_reason or "connection closed"))
        return fut

    # ------------------------------------------------------------------ KIP-368
    def _must_wait(self) -> bool:
        """Whether a request waits for a re-authentication (started here when it is due)."""
        if self._held is not None:
            return True
        reauth = self.reauth
        if reauth is None or not reauth.due():
            return False
        self._held = collections.deque()
        self._reauth_task = asyncio.get_running_loop().create_task(self._reauthenticate(reauth))
        return True

    async def _reauthenticate(self, reauth: Reauthentication) -> None:
        try:
            while self.inflight and not self.closed:       # the responses owed come first
                self._idle = asyncio.get_running_loop().create_future()
                await self._idle
            if self.closed:
                raise ConnectionClosed(self.close_reason or "connection closed")
            await reauth(self)
        except BaseException as e:  # noqa: BLE001 — any failure ends the connection, as Kafka's
            error = e if isinstance(e, ConnectionError) else \
                ConnectionClosed(f"re-authentication failed: {e!r}")
            self._fail_held(error)
            self.close(f"re-authentication failed: {error}")
            if not isinstance(e, Exception):
                raise                   # cancelled: the waiting requests have failed
            return
        finally:
            self._idle = None
            self._reauth_task = None
        held, self._held = self._held, None
        for fut, write in held or ():
            if not fut.done():          # a caller may have given up on it meanwhile
                write()

    def send_encoded(self, api_key: int, version: int, body: bytes, flexible: bool,
                     gathered: bool = False) -> asyncio.Future[Any]:
        """send(..., raw=True) of a body its caller encoded (the replica fetcher's FetchRequest:
        protocol/fetch_request.py): the future resolves to the raw response body; with
        `gathered`, to a protocol.gathered.Gathered body when one arrives so (memory pipes)."""
        fut = self._future()
        if not fut.done():
            if (self._held is not None or self.reauth is not None) and self._must_wait():
                assert self._held is not None, "_must_wait() made the queue"
                self._held.append((fut, lambda: self._write_encoded(
                    fut, api_key, version, body, flexible, gathered)))
            else:
                self._write_encoded(fut, api_key, version, body, flexible, gathered)
        return fut

    def _write_encoded(self, fut: asyncio.Future[Any], api_key: int, version: int, body: bytes,
                       flexible: bool, gathered: bool) -> None:
        corr = self._corr = (self._corr + 1) & 0x7FFFFFFF
        cid = self.client_id.encode()
        hdr = _REQ_HDR.pack(api_key, version, corr, len(cid)) + cid + (b"\x00" if flexible else b"")
        assert self.transport is not None, "requests are sent once connected"
        self.transport.writelines((_I32.pack(len(hdr) + len(body)), hdr, body))
        # In place of a response class, whether the response header is flexible (bool).
        self.inflight.append((corr, flexible and api_key != 18, version, fut,
                              _RAW_GATHERED if gathered else True))

    async def request(self, req: Any, version: int, timeout: float | None = 30.0,
                      response_class: Any = None, authenticating: bool = False) -> Any:
        fut = self.send(req, version, response_class, authenticating=authenticating)
        if timeout is None:
            return await fut
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            # A lost response desynchronises the stream: the connection is unusable.
            self.close("request timed out")
            name = type(req).__name__.removesuffix("Request")
            raise asyncio.TimeoutError(f"{self.peer()} did not answer {name} in "
                                       f"{timeout * 1000:.0f} ms") from None

    def peer(self) -> str:
        """"host:port" of the other end, for messages ("broker" when unknown: memory pipes)."""
        if self.transport is None:
            return "broker"
        try:
            host, port = self.transport.get_extra_info("peername")[:2]
            return f"{host}:{port}"
        except (AttributeError, TypeError):
            return "broker"

    # Responses are received straight into the FrameReader's buffer (one copy at most per frame).
    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        if self._read(self.reader.buffer_updated, nbytes) and self.reader.large_frames \
                and not self.closed:
            assert self.tuning is not None, "set with the transport"
            self.tuning.quick_ack()

    def data_received(self, data: bytes) -> None:
        """asyncio.Protocol form (kept for callers that feed bytes by hand)."""
        self._read(self.reader.feed, data)

    takes_gathered = True       # network/memory.py may hand over Gathered frames

    def frames_arrived(self, buf: bytearray | Gathered) -> None:
        """network/memory.py's delivery: whole frames in a buffer handed over, or one Gathered."""
        self._read(self.reader.take, buf)

    def _read(self, frames_of: Callable[[Any], Iterable[Any]], arg: Any) -> bool:
        """Handle the frames `frames_of(arg)` completes; False when the stream broke the protocol
        (the connection is closed)."""
        try:
            frames = frames_of(arg)
        except ProtocolViolation as e:
            self.close(str(e))
            return False
        self._handle_frames(frames)
        if self._idle is not None and not self.inflight and not self._idle.done():
            self._idle.set_result(None)         # a re-authentication may start
        return True

    def _handle_frames(self, frames: Iterable[memoryview | Gathered]) -> None:
        for frame in frames:
            if not self.inflight:
                self.close("unexpected response")
                return
            corr, rcls, version, fut, raw = self.inflight.popleft()
            if type(frame) is Gathered and raw is not _RAW_GATHERED:
                frame = memoryview(frame.joined())[4:]      # for a decoder of contiguous bytes
            head = frame.frame if type(frame) is Gathered else frame
            rcorr = _I32.unpack_from(head, 0)[0] if len(head) >= 4 else None
            if rcorr != corr:
                # Put the request back, so closing fails its future with the others.
                self.inflight.appendleft((corr, rcls, version, fut, raw))
                self.close(f"response of {len(head)} bytes has no correlation id" if rcorr is None
                           else f"correlation id mismatch: got {rcorr}, want {corr}")
                return
            if fut.done():
                continue
            try:
                # Not raw: a Gathered frame was joined above.
                fut.set_result(response_body(rcls, frame, version) if raw
                               else decode_response(rcls, frame, version))  # type: ignore[arg-type]
            except Exception as e:  # noqa: BLE001
                fut.set_exception(e)


def decode_response(rcls: Any, frame: memoryview, version: int) -> Any:
    pos = 4
    flexible = rcls.flexible_version_q(version)
    if flexible and rcls.API_KEY != 18:
        n = frame[pos]
        pos += 1
        assert n == 0, "tagged fields in response header are not expected"
    if rcls.API_KEY == 18:
        (err,) = struct.unpack_from(">h", frame, pos)
        if err != 0:
            version = 0
            flexible = False
    decode = rcls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                               data_class=rcls[None])
    obj, _ = decode(frame, pos)
    obj._version = version
    return obj


def response_body(rcls: Any, frame: memoryview | Gathered, version: int) -> memoryview | Gathered:
    """The body of a response frame, after its header: correlation id, then (header v1, flexible
    versions except ApiVersions) a tagged-field section, skipped. `rcls` may be that flexibility
    itself (a bool: send_encoded)."""
    pos = 4
    gathered: Gathered | None = None
    if type(frame) is Gathered:
        gathered = frame
        frame = frame.frame
    if rcls if isinstance(rcls, bool) else (rcls.API_KEY != 18 and rcls.flexible_version_q(version)):
        _, pos = _skip_tags(frame, pos, len(frame))
    return frame[pos:] if gathered is None else gathered.body(pos)
