"""Sans-IO framing: split a byte stream into size-prefixed frames and parse request headers.

No sockets here; `network/` feeds bytes in and gets frames out (h11-style).
"""
from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from minibroker.protocol.gathered import Gathered
from minibroker.protocol.varint import uvarint_reader

_I32 = struct.Struct(">i")
API_PREFIX = struct.Struct(">hhi")          # api_key, api_version, correlation_id
_HDR_CLIENT_ID = struct.Struct(">hhih")     # ... and the client_id's length


class ProtocolViolation(Exception):
    """A violation that closes the connection it came from (and nothing else)."""


class FramePool(Protocol):
    """What a FrameReader reserves large frames from, and its connection waits on when refused
    (network/request_pool.RequestMemoryPool; protocol/ sits below network/, so a Protocol)."""

    def try_reserve(self, size: int) -> bool: ...
    def release(self, size: int) -> None: ...
    def wait(self, wake: Callable[[], None]) -> None: ...
    def forget(self, wake: Callable[[], None]) -> None: ...


def _unexported(buf: bytearray) -> bool:
    """No memoryview (frame, slice a handler kept) points into `buf`: resizing it would fail."""
    try:
        last = buf.pop()
    except BufferError:
        return False
    buf.append(last)
    return True


def _uninitialized_bytearray() -> Callable[[int], bytearray]:
    """bytearray(n) without zeroing it: a large frame's buffer is written by the receive anyway,
    and zeroing ~1 MB per produce request cost as much as copying it (benchmarks/README.md)."""
    try:
        make = ctypes.pythonapi.PyByteArray_FromStringAndSize
    except AttributeError:                          # not CPython
        return bytearray
    make.restype = ctypes.py_object
    make.argtypes = (ctypes.c_char_p, ctypes.c_ssize_t)
    return lambda n: make(None, n)


uninitialized_bytearray = _uninitialized_bytearray()


def handed_over(data: object) -> bool:
    """Whether to keep `data` rather than copy it: it is a slice of a large frame, which FrameReader
    hands over writable (its bytes are the taker's to keep and patch), and it is at least half of
    that frame, so keeping it keeps at most as many other bytes alive (a small batch beside a
    large one is copied rather than pinning the large one's memory after it is deleted)."""
    # `obj` is the frame's bytearray (typeshed types it Buffer, which is not Sized).
    return isinstance(data, memoryview) and not data.readonly and \
        2 * data.nbytes >= len(data.obj)  # type: ignore[arg-type]


class FrameReader:
    """Splits a byte stream into size-prefixed frames, yielded as memoryviews.

    Bytes are received straight into a private bytearray (`get_buffer` / `buffer_updated`, the
    asyncio.BufferedProtocol interface) and frames are views of it: no copy per complete frame.

    Small frames (up to CHUNK) share buffers and are read-only views. A buffer is never written
    again below its write position, and a full buffer is replaced rather than compacted, so frames
    (and slices handlers keep) stay valid; a frame that does not fit in the rest of the current
    buffer has its received prefix copied once into the next.

    A large frame (over CHUNK) is received into a buffer of its own, allocated for exactly that
    frame and not zeroed, and is handed over *writable*: the reader never touches that buffer
    again, so whoever takes the frame owns its bytes and may keep and patch slices of it (the log
    stores a produce request's batches that way, without copying them). After a large frame, the
    next one's 4-byte size is read alone, so that it too gets a buffer of exactly its size.
    `feed(data)` is the asyncio.Protocol form: it copies `data` into the same buffers (one copy)."""

    __slots__ = ("_buf", "_view", "_start", "_end", "_max", "_spares", "_last_large", "_own",
                 "large_frames", "pool", "waiting", "_reserved")

    FIRST = 4096                # a connection's first buffer (many connections carry little)
    CHUNK = 64 * 1024           # buffers double up to this; larger frames get their own buffer
    MIN_READ = 1024             # below this much room a fresh buffer is taken for the next read
    SPARES = 6                  # earlier shared buffers kept for reuse once their frames are gone

    def __init__(self, max_frame_bytes: int) -> None:
        self._max = max_frame_bytes
        self._buf = bytearray(self.FIRST)
        self._view = memoryview(self._buf)
        self._start = 0         # first unparsed byte
        self._end = 0           # write position
        self._spares: list[bytearray] = []
        self._last_large = False    # the last frame was large: read the next one's size alone
        self._own = False       # _buf belongs to the large frame being received
        # A large frame is being received, or the last frame was large (_own or _last_large,
        # kept as a plain attribute: the network layer reads it after every receive).
        self.large_frames = False
        # queued.max.request.bytes (network/request_pool.py): a large frame's own buffer is
        # taken only once `pool.try_reserve(size)` grants it; until then `waiting` holds its
        # size, the connection stops reading and what arrived stays in the shared buffer.
        # The reservation goes back when the frame is complete (or the reader is released).
        self.pool: FramePool | None = None
        self.waiting = 0
        self._reserved = 0

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Writable space for the next receive (at least 1 byte)."""
        start, end = self._start, self._end
        if end - start >= 4:
            (size,) = _I32.unpack_from(self._buf, start)
            if 0 <= size <= self._max:
                if 4 + size > self.CHUNK:
                    if not self._own:
                        if self.pool is not None:
                            if not self.pool.try_reserve(4 + size):
                                self.waiting = 4 + size
                                return self._room_while_waiting()
                            self.waiting, self._reserved = 0, 4 + size
                        self._take_own(4 + size)
                    return self._view[self._end:]
                if start + 4 + size > len(self._buf):
                    self._renew(max(4 + size, min(2 * len(self._buf), self.CHUNK)))
        elif self._last_large:
            # Between large frames (a producer's): the next size alone, then a buffer for that frame.
            if len(self._buf) - start < 4:
                self._renew(self.MIN_READ)
            return self._view[self._end:self._start + 4]
        elif len(self._buf) - end < self.MIN_READ:
            self._renew(min(2 * len(self._buf), self.CHUNK))
        return self._view[self._end:]

    def _room_while_waiting(self) -> memoryview:
        """Space for one more receive while a large frame waits for the pool (the connection
        pauses reading after it): the shared buffer's rest, at most CHUNK + MIN_READ in all."""
        if len(self._buf) - self._end < 1:
            self._renew(self._end - self._start + self.MIN_READ)
        return self._view[self._end:]

    def release(self) -> None:
        """The connection is gone: a reservation held for a partial large frame goes back."""
        if self._reserved and self.pool is not None:
            self.pool.release(self._reserved)
        self._reserved = self.waiting = 0

    @property
    def held_bytes(self) -> int:
        """The bytes this reader's buffers hold (its own and the spares it keeps)."""
        return len(self._buf) + sum(len(s) for s in self._spares)

    def _spare(self, capacity: int) -> bytearray | None:
        """A kept buffer of at least `capacity` bytes that no view points into any more."""
        for i, s in enumerate(self._spares):
            if len(s) >= capacity and _unexported(s):
                return self._spares.pop(i)
        return None

    def _switch(self, buf: bytearray, keep_old: bool) -> None:
        """Continue in `buf`, moving the unparsed tail there (copied once)."""
        old_view, start, end = self._view, self._start, self._end
        n = end - start
        if n:
            buf[:n] = old_view[start:end]
        old_view.release()
        if keep_old:
            self._spares.append(self._buf)
            if len(self._spares) > self.SPARES:
                del self._spares[0]
        self._buf = buf
        self._view = memoryview(buf)
        self._start = 0
        self._end = n

    def _renew(self, capacity: int) -> None:
        """Move the unparsed tail into another shared buffer. The old one may back live frames, so
        it is kept as a spare and reused only once no view of it is left."""
        self._switch(self._spare(capacity) or bytearray(capacity), keep_old=True)

    def _take_own(self, frame_size: int) -> None:
        """Give the large frame begun here a buffer of exactly its size (its prefix copied)."""
        self._switch(uninitialized_bytearray(frame_size), keep_old=True)
        self._own = True
        self.large_frames = True

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """`nbytes` were written into the last get_buffer(); returns the frames now complete."""
        self._end += nbytes
        if self._own:
            if self._end < len(self._buf):
                return []
            # The large frame is complete and its buffer is the frame's: hand it over writable and
            # continue in a shared buffer (the reader never writes this one again).
            frame = self._view[4:]
            self._own = False
            self._last_large = True
            if self._reserved and self.pool is not None:    # the pool bounds requests being read
                self.pool.release(self._reserved)
                self._reserved = 0
            self._start = self._end = 0
            self._switch(self._spare(self.MIN_READ) or bytearray(self.FIRST), keep_old=False)
            return [frame]
        buf = self._buf
        pos, end = self._start, self._end
        frames: list[memoryview] = []
        view = None
        while end - pos >= 4:
            size = self._size_at(buf, pos)
            if end - pos - 4 < size:
                break
            if view is None:
                view = self._view.toreadonly()
            frames.append(view[pos + 4:pos + 4 + size])
            pos += 4 + size
        if frames:
            self._last_large = self.large_frames = False
        self._start = pos
        return frames

    def _size_at(self, buf: bytearray, pos: int) -> int:
        """The size prefix at `pos`, or ProtocolViolation (negative, or past the limit)."""
        return self._checked(_I32.unpack_from(buf, pos)[0])

    def _checked(self, size: int) -> int:
        if size < 0 or size > self._max:
            raise ProtocolViolation(
                f"frame of {size} bytes exceeds socket.request.max.bytes={self._max}"
                if size > 0 else f"invalid frame size {size}")
        return size

    def take(self, buf: bytearray | Gathered) -> list[memoryview] | list[Gathered]:
        """In-memory input (network/memory.py): `buf` is the sender's whole frames, copied once
        into a bytearray that is now ours. Its frames are views of it, as from a receive: a
        large one (over CHUNK) writable (the receiver may keep and patch its slices), the others
        read-only; anything else (a partial frame pending or given) goes through feed. A
        Gathered frame (protocol/gathered.py) is taken as it is, its size checked."""
        if type(buf) is Gathered:
            if self._start == self._end:
                self._checked(buf.size)
                return [buf]
            return self.feed(buf.joined())
        if self._start == self._end:
            frames: list[memoryview] = []
            pos, end = 0, len(buf)
            view = memoryview(buf)
            ro = view.toreadonly()
            chunk = self.CHUNK
            while end - pos >= 4:
                size = self._size_at(buf, pos)
                if end - pos - 4 < size:
                    break
                frames.append((view if size > chunk else ro)[pos + 4:pos + 4 + size])
                pos += 4 + size
            if pos == end:
                return frames
        return self.feed(buf)

    def feed(self, data: bytes | bytearray) -> list[memoryview]:
        """Protocol-style input: copy `data` in (once) and return the frames now complete."""
        frames: list[memoryview] = []
        mv = memoryview(data)
        while mv:
            dst = self.get_buffer(len(mv))
            n = min(len(dst), len(mv))
            dst[:n] = mv[:n]
            frames += self.buffer_updated(n)
            mv = mv[n:]
        return frames

    @property
    def buffered(self) -> int:
        return self._end - self._start


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


# An unsigned varint at buf[pos:end] (at most 5 bytes): (value, next pos); a truncated or
# overlong one is a protocol violation.
read_uvarint = uvarint_reader(ProtocolViolation)


def peek_api(frame: memoryview) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id — enough to route or to answer an error."""
    if len(frame) < 8:
        raise ProtocolViolation(f"request of {len(frame)} bytes is shorter than a header")
    return API_PREFIX.unpack_from(frame, 0)


def parse_request_header(frame: memoryview, flexible: bool) -> RequestHeader:
    if len(frame) < 10:
        peek_api(frame)                 # the shorter-than-a-header message, if it is that
        raise ProtocolViolation("truncated client_id")
    api_key, api_version, corr, n = _HDR_CLIENT_ID.unpack_from(frame, 0)
    pos = 10
    client_id = None
    if n >= 0:
        if pos + n > len(frame):
            raise ProtocolViolation("truncated client_id")
        client_id = str(frame[pos:pos + n], "utf-8", "replace")
        pos += n
    if flexible and pos < len(frame) and frame[pos] == 0:
        pos += 1                       # no header tags: the common case, without the varint loop
    elif flexible:                     # request header v2: tagged fields follow
        count, pos = read_uvarint(frame, pos, len(frame))
        for _ in range(count):
            _tag, pos = read_uvarint(frame, pos, len(frame))
            size, pos = read_uvarint(frame, pos, len(frame))
            pos += size
            if pos > len(frame):
                raise ProtocolViolation("truncated header tagged fields")
    return RequestHeader(api_key, api_version, corr, client_id, pos)


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    return _I32.pack(correlation_id) + (b"\x00" if flexible else b"")


def frame_parts(parts: Sequence[bytes | bytearray | memoryview]
                ) -> list[bytes | bytearray | memoryview]:
    """Prefix a list of buffers with the 4-byte total size, for transport.writelines()."""
    size = 0
    for p in parts:
        size += len(p)
    return [_I32.pack(size), *parts]
