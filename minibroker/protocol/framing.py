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


class FrameReader:
    """Accumulates bytes and yields complete frames as memoryviews of private buffers."""

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes

    def feed(self, data: bytes) -> list[memoryview]:
        buf = self._buf
        buf += data
        frames = []
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            (size,) = _I32.unpack_from(buf, pos)
            if size < 0 or size > self._max:
                raise ProtocolViolation(
                    f"frame of {size} bytes exceeds socket.request.max.bytes={self._max}"
                    if size > 0 else f"invalid frame size {size}")
            if n - pos - 4 < size:
                break
            # bytes() copies once; the frame then owns its memory, so handlers may keep slices.
            frames.append(memoryview(bytes(buf[pos + 4:pos + 4 + size])))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def _read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    value = 0
    while True:
        if pos >= len(buf):
            raise ProtocolViolation("truncated varint in request header")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise ProtocolViolation("varint too long in request header")


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
        client_id = bytes(frame[pos:pos + n]).decode("utf-8", "replace")
        pos += n
    if flexible:                       # request header v2: tagged fields follow
        count, pos = _read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
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
