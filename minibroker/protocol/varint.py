"""Kafka's variable-length integers: the one implementation (Kafka's ByteUtils).

Unsigned varints carry flexible versions' lengths, counts and tagged fields; zigzag (signed)
varints the fields of records inside v2 batches. Reads take at most 5 bytes (32-bit values), as
Kafka's readVarint / readUnsignedVarint do. A reader is made per error (`uvarint_reader(
ProtocolViolation)`: a bad frame closes its connection; `varint_reader(<InvalidRecordError>)`: a
bad batch is refused), so each caller raises its own error without a wrapper call per field.
The hot decoders (protocol/fast.py, log/records_check.py) inline the one- and two-byte cases
before calling in here: a call per field is measurably slower there.
"""
from __future__ import annotations

from typing import Callable

Buffer = bytes | bytearray | memoryview
# read(buf, pos, end) -> (value, next pos)
Reader = Callable[[Buffer, int, int], tuple[int, int]]

# The one-byte unsigned varints, 0-127: indexed directly by the hot encoders.
SMALL_UVARINTS = [bytes((i,)) for i in range(0x80)]


def uvarint_bytes(n: int) -> bytes:
    """An unsigned varint's bytes (n >= 0)."""
    if n < 0x80:
        return SMALL_UVARINTS[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def write_varint(value: int, out: bytearray) -> None:
    """Append a zigzag (signed, 64-bit) varint to `out` (record fields)."""
    value = (value << 1) ^ (value >> 63)
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def uvarint_reader(error: Callable[[str], Exception]) -> Reader:
    """read(buf, pos, end) -> (value, next pos) of an unsigned varint in buf[pos:end]; truncated
    or over 5 bytes raises error(why)."""
    def read_uvarint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
        shift = value = 0
        while True:
            if pos >= end:
                raise error("truncated varint")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value, pos
            shift += 7
            if shift > 28:
                raise error("varint longer than 5 bytes")
    return read_uvarint


def read_varint(data: Buffer, pos: int) -> tuple[int, int]:
    """A zigzag varint at data[pos]: (value, next pos), without bounds or length checks, for bytes
    already checked (a stored batch, a record set a client decodes); truncated data raises
    IndexError."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    n, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = data[pos]
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos + 1
        shift += 7


def varint_reader(error: Callable[[str], Exception]) -> Reader:
    """As uvarint_reader, for a zigzag (signed) varint."""
    read_uvarint = uvarint_reader(error)

    def read_varint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
        value, pos = read_uvarint(buf, pos, end)
        return (value >> 1) ^ -(value & 1), pos
    return read_varint
