"""Sans-IO framing: split a byte stream into size-prefixed frames and parse request headers.

No sockets here; `network/` feeds bytes in and gets frames out (h11-style).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

_I32 = struct.Struct(">i")
_HDR = struct.Struct(">hhi")          # api_key, api_version, correlation_id


class ProtocolViolation(Exception):
    """A violation that closes the connection it came from (and nothing else)."""


def _unexported(buf: bytearray) -> bool:
    """No memoryview (frame, slice a handler kept) points into `buf`: resizing it would fail."""
    try:
        last = buf.pop()
    except BufferError:
        return False
    buf.append(last)
    return True


class FrameReader:
    """Splits a byte stream into size-prefixed frames, yielded as read-only memoryviews.

    Bytes are received straight into a private bytearray (`get_buffer` / `buffer_updated`, the
    asyncio.BufferedProtocol interface) and frames are views of it: no copy per complete frame.
    A buffer is never written again below its write position, and a full buffer is replaced rather
    than compacted, so frames (and slices handlers keep) stay valid. A frame that does not fit in the
    rest of the current buffer gets a new buffer sized for the whole frame, into which its received
    prefix is copied once: a large frame arriving in many chunks costs one copy of at most that
    prefix, never a re-copy per chunk (amortised O(n)). A large frame is read to its end and the
    next is given room for one as large, so a producer's stream of large frames is not copied at
    all. `feed(data)` is the asyncio.Protocol form: it copies `data` into the same buffers (one
    copy)."""

    __slots__ = ("_buf", "_view", "_start", "_end", "_max", "_spares", "_last_large")

    FIRST = 4096                # a connection's first buffer (many connections carry little)
    CHUNK = 64 * 1024           # buffers double up to this while frames are small
    MIN_READ = 1024             # below this much room a fresh buffer is taken for the next read
    SPARES = 6                  # earlier buffers kept for reuse once their frames are gone
                                # (a pipelining producer has ~5 acks=all requests in flight)
    PREDICT_MAX = 16 * 1024 * 1024   # the largest frame a next one's room is set aside for

    def __init__(self, max_frame_bytes: int) -> None:
        self._max = max_frame_bytes
        self._buf = bytearray(self.FIRST)
        self._view = memoryview(self._buf)
        self._start = 0         # first unparsed byte
        self._end = 0           # write position
        self._spares: list[bytearray] = []
        self._last_large = 0    # size with prefix of the last frame, if it was over CHUNK

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        """Writable space for the next receive (at least 1 byte)."""
        start, end = self._start, self._end
        cap = len(self._buf)
        if end - start >= 4:
            (size,) = _I32.unpack_from(self._buf, start)
            if 0 <= size <= self._max:
                if start + 4 + size > cap:
                    # The frame does not fit: a buffer for all of it; its prefix is copied once.
                    self._renew(max(4 + size, min(2 * cap, self.CHUNK)))
                    start = 0
                if 4 + size > self.CHUNK:
                    # A large frame is read to its end and no further, so the next one begins at
                    # a boundary, where room is made for it (below) rather than its prefix copied.
                    return self._view[self._end:start + 4 + size]
        else:
            expect = self._last_large
            if cap - end < expect:
                # Between large frames (a producer's): the next is likely as large, so it begins
                # in a buffer it fits rather than having its prefix copied there later (that copy
                # was ~5% of a broker taking 10 KiB produce).
                self._renew(expect)
            elif cap - end < self.MIN_READ:
                self._renew(min(2 * cap, self.CHUNK))
            if expect:          # no further than such a frame: little of the one after to copy
                return self._view[self._end:self._end + expect]
        return self._view[self._end:]

    def _renew(self, capacity: int) -> None:
        """Move the unparsed tail into another buffer. The old one may back live frames, so it is
        kept as a spare and reused only once no view of it is left (fresh large bytearrays cost
        page faults and zeroing: allocating one per large frame was 24% of a replicating broker)."""
        old_view, start, end = self._view, self._start, self._end
        n = end - start
        spares = self._spares
        if n == 0:
            old_view.release()
            spares.append(self._buf)
        buf = None
        for i, s in enumerate(spares):
            if len(s) >= capacity and _unexported(s):
                buf = spares.pop(i)
                break
        if buf is None:
            if capacity > self.CHUNK:     # headroom, so a spare fits the next similar frame
                capacity = (capacity + capacity // 4 + 0xFFFF) & ~0xFFFF
            buf = bytearray(capacity)
        if n:
            buf[:n] = old_view[start:end]
            old_view.release()
            spares.append(self._buf)
        if len(spares) > self.SPARES:
            del spares[0]
        self._buf = buf
        self._view = memoryview(buf)
        self._start = 0
        self._end = n

    def buffer_updated(self, nbytes: int) -> list[memoryview]:
        """`nbytes` were written into the last get_buffer(); returns the frames now complete."""
        self._end += nbytes
        buf = self._buf
        pos, end = self._start, self._end
        frames = []
        view = None
        while end - pos >= 4:
            (size,) = _I32.unpack_from(buf, pos)
            if size < 0 or size > self._max:
                raise ProtocolViolation(
                    f"frame of {size} bytes exceeds socket.request.max.bytes={self._max}"
                    if size > 0 else f"invalid frame size {size}")
            if end - pos - 4 < size:
                break
            if view is None:
                view = self._view.toreadonly()
            frames.append(view[pos + 4:pos + 4 + size])
            pos += 4 + size
        if frames:
            size = len(frames[-1]) + 4
            self._last_large = size if self.CHUNK < size <= self.PREDICT_MAX else 0
        self._start = pos
        return frames

    def feed(self, data: bytes) -> list[memoryview]:
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

    def missing(self) -> int:
        """Bytes of the frame begun in the buffer that have not arrived (0: no frame begun)."""
        start, end = self._start, self._end
        if end - start < 4:
            return 0
        (size,) = _I32.unpack_from(self._buf, start)
        return start + 4 + size - end

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


def read_uvarint(buf: memoryview, pos: int, end: int) -> tuple[int, int]:
    """An unsigned varint at buf[pos:end] (at most 5 bytes); truncation is a protocol violation."""
    shift = 0
    value = 0
    while True:
        if pos >= end:
            raise ProtocolViolation("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolViolation("varint longer than 5 bytes")


def peek_api(frame: memoryview) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id — enough to route or to answer an error."""
    if len(frame) < 8:
        raise ProtocolViolation(f"request of {len(frame)} bytes is shorter than a header")
    return _HDR.unpack_from(frame, 0)


def parse_request_header(frame: memoryview, flexible: bool) -> RequestHeader:
    api_key, api_version, corr = peek_api(frame)
    pos = 8
    if len(frame) < 10:
        raise ProtocolViolation("truncated client_id")
    (n,) = struct.unpack_from(">h", frame, pos)
    pos += 2
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


def frame_parts(parts: list) -> list:
    """Prefix a list of buffers with the 4-byte total size, for transport.writelines()."""
    size = 0
    for p in parts:
        size += len(p)
    return [_I32.pack(size), *parts]
