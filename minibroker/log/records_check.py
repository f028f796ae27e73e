"""The records inside a client's batch, checked as Kafka's LogValidator does before it stores them.

A batch whose CRC is right may still lie about its contents: an unknown codec, a compressed body that
does not decode (or decodes to a gigabyte), a record count that does not match the records present
(count 2^31-1 with one record moves the log end offset by 2^31), records whose offset deltas are not
0, 1, 2, ..., or records whose fields run past their length. Such a batch is refused whole:

- unknown codec, undecodable or oversized compressed body -> CorruptRecordError (CORRUPT_MESSAGE)
- records that do not parse, or do not match the header -> InvalidRecordError (INVALID_RECORD), as
  Kafka's DefaultRecordBatch iterator throws InvalidRecordException.

Cost: a compressed batch is decompressed (C) and walked record by record, as Kafka's validator
does (~1.4 µs per record here). An uncompressed batch, the produce hot path at ~1.5 M records/s,
only has its record lengths walked: the count is exact and every record's bytes lie inside the
batch, but fields inside a record and offset deltas are not read (Kafka's validator rewrites wrong
inner offsets instead of refusing them; readers here tolerate bad fields). The walk reads a
length per record in Python (~0.2 µs) until two records in a row are equally long, then counts
the run of records with that same length prefix in C (strided slices): a producer's batch of
equal-sized values is walked at ~15-25 ns per record (a served broker's 100 B produce spent
~0.25 µs per record here before: as much as the rest of its produce path).
A batch whose declared count cannot fit in its bytes (every record takes at least 7) is refused
before any walk. A codec library that is not installed (the `codecs` extra) leaves that codec's
contents unchecked.
"""
from __future__ import annotations

import ctypes
import io
import struct
import zlib

from kafka.errors import CorruptRecordError, InvalidRecordError

from minibroker.protocol.varint import varint_reader

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
MIN_RECORD_SIZE = 7                       # length, attributes, ts delta, offset delta, key, value, headers
# The largest decompressed body accepted for one batch. Producers close a batch near batch.size
# (default 16 KiB) of uncompressed bytes, and a request is bounded by max.request.size (1 MiB), so a
# legitimate batch stays far below this; a hostile one (a 9.7 KB zstd frame claiming 1 GB) stops here.
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_I32 = struct.Struct(">i")
BytesLike = bytes | bytearray | memoryview


def check_records(body: BytesLike, count: int, compression: int, *,
                  max_decompressed: int = MAX_DECOMPRESSED_BYTES) -> None:
    """Raise unless `body` (the bytes after a v2 batch header) holds exactly `count` well-formed
    records with offset deltas 0..count-1, after decompressing with `compression`."""
    if compression != NONE:
        if compression > ZSTD:
            raise CorruptRecordError(f"Unknown compression type id: {compression}")
        records = _decompress(body, compression, max_decompressed)
        if records is None:               # codec library not installed: contents unchecked
            return
        body = records
    if count * MIN_RECORD_SIZE > len(body):
        raise InvalidRecordError(
            f"Incorrect declared batch size: {count} records cannot fit in {len(body)} bytes")
    if compression != NONE:
        _walk(body, count)
    else:
        _walk_lengths(body, count)


def _walk_lengths(buf: BytesLike, count: int) -> None:
    """The records' length prefixes tile `buf` exactly, `count` of them, each a possible record.
    One- and two-byte lengths (records under 8 KiB) are read inline; the zigzag sign is the first
    byte's low bit, so a negative length is refused before it is decoded. Where a record is as
    long as the one before it, the records that follow with the very same length prefix are
    counted in C by `_same_prefix` (a producer's batch of equal-sized values is a few such runs):
    Python work per run, not per record. A try that finds no run waits 64 records for the next,
    so records of few alternating sizes cost little more than the plain walk."""
    end = len(buf)
    pos = n = last = retry = 0
    data: bytes | bytearray | None = None
    while pos < end:
        b = buf[pos]
        if b < 0x80:
            if b < 12 or b & 1:                     # shorter than a record, or negative
                raise _bad(f"record {n} has length {(b >> 1) ^ -(b & 1)}")
            step = 1 + (b >> 1)
        else:
            v = buf[pos + 1] if pos + 1 < end else 0x80
            if v < 0x80 and not b & 1:              # two bytes, positive: 64 .. 8191
                step = 2 + (((b & 0x7F) | (v << 7)) >> 1)
            else:
                length, after = _varint(buf, pos, end)
                if length < MIN_RECORD_SIZE - 1:
                    raise _bad(f"record {n} has length {length}")
                step = after - pos + length
        if step == last and n >= retry:
            if data is None:
                data, base = _strided(buf)
            run = _same_prefix(data, base, buf, pos, step, end) or 1
            if run < 8:                             # no run here: walk on before trying again
                retry = n + 64
            pos += run * step
            n += run
        else:
            pos += step
            n += 1
        last = step
    if pos != end:
        raise InvalidRecordError(
            f"Incorrect declared batch size, premature EOF reached (record {n - 1} runs "
            f"{pos - end} bytes past the batch)")
    if n != count:
        raise InvalidRecordError(
            f"Incorrect declared batch size: {n} records present, {count} declared")


def _strided(buf: BytesLike) -> tuple[bytes | bytearray, int]:
    """`buf` as (an object whose strided slices are built by a tight C loop, where `buf` starts in
    it). bytes and bytearray slice at ~1 ns a byte; a memoryview slices item by item (~6 ns), so a
    writable view (a large frame's buffer) is sliced through the bytearray under it, at its
    offset there (a copy of a 1 MB batch would be new memory to fault in, more than the walk),
    and a read-only one (a small frame's) is copied. (A ctypes array over it was no faster in a
    served broker, and ctypes keeps every array type it makes: one per batch length, for ever.)"""
    if isinstance(buf, memoryview):
        base = buf.obj
        if not buf.readonly and isinstance(base, bytearray) and buf.contiguous \
                and buf.itemsize == 1 and len(buf):
            return base, _address(buf) - _address(base)
        return bytes(buf), 0
    return buf, 0


def _address(writable: bytearray | memoryview) -> int:
    c = ctypes.c_char.from_buffer(writable)
    try:
        return ctypes.addressof(c)
    finally:
        del c                               # it holds an export of the buffer


def _same_prefix(data: bytes | bytearray, base: int, buf: BytesLike, pos: int, step: int, end: int
                 ) -> int:
    """How many whole records of `step` bytes from `pos` on start with the length prefix (a varint,
    already checked) of the one at `pos`: equal varint bytes are equal lengths. (`data`, `base`)
    is `buf` as `_strided` gives it. Each prefix byte is compared down a strided slice, against
    a fill of that byte (memcmp) and, where they differ, by `lstrip` (which counts the leading
    equal ones a memchr per byte), over windows growing 8-fold while the run fills them, so a run
    costs O(its length) whatever follows it."""
    fit = (end - pos) // step
    run = 0
    window = 8
    while run < fit:
        lim = min(fit - run, window)
        start = base + pos + run * step
        stop = start + lim * step
        same = lim
        k = 0
        while True:
            column = data[start + k:stop:step]
            fill = data[base + pos + k:base + pos + k + 1]
            if column != fill * lim:
                same = min(same, lim - len(column.lstrip(fill)))
            if buf[pos + k] < 0x80:                 # the prefix's last byte
                break
            k += 1
        run += same
        if same < lim:
            break
        window *= 8
    return run


def _bad(why: str) -> InvalidRecordError:
    return InvalidRecordError(f"Found invalid record structure: {why}")


# A zigzag varint of at most 5 bytes (Kafka's ByteUtils.readVarint); a bad one is a bad record.
_varint = varint_reader(_bad)


def _walk(buf: BytesLike, count: int) -> None:
    end = len(buf)
    pos = 0
    varint = _varint
    for expected_delta in range(count):
        # Single-byte varints inline: most lengths, deltas and header counts of small records.
        b = buf[pos] if pos < end else 0x80
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = varint(buf, pos, end)
        rec_end = pos + length
        if length < MIN_RECORD_SIZE - 1 or rec_end > end:
            raise _bad(f"record {expected_delta} has length {length} with {end - pos} bytes left")
        pos += 1                                   # attributes
        pos = varint(buf, pos, rec_end)[1]         # timestamp delta
        b = buf[pos] if pos < rec_end else 0x80
        if b < 0x80:
            delta, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            delta, pos = varint(buf, pos, rec_end)
        if delta != expected_delta:
            raise InvalidRecordError(
                f"Record {expected_delta} of the batch has offset delta {delta}, expected {expected_delta}")
        for _ in range(2):                         # key, value
            n, pos = varint(buf, pos, rec_end)
            if n < -1:
                raise _bad(f"negative length {n}")
            if n > 0:
                pos += n
        n_headers, pos = varint(buf, pos, rec_end)
        if n_headers < 0:
            raise _bad(f"negative header count {n_headers}")
        for _ in range(n_headers):
            n, pos = varint(buf, pos, rec_end)
            if n < 0:
                raise _bad(f"header key length {n}")
            pos += n
            n, pos = varint(buf, pos, rec_end)
            if n < -1:
                raise _bad(f"header value length {n}")
            if n > 0:
                pos += n
        if pos != rec_end:
            raise _bad(f"record {expected_delta} declares {length} bytes but its fields take "
                       f"{length + pos - rec_end}")
    if pos != end:
        raise InvalidRecordError(
            f"Incorrect declared batch size, records still remaining in file ({end - pos} bytes after "
            f"{count} records)")


# -- bounded decompression ------------------------------------------------------------------------------

def _too_big(limit: int) -> CorruptRecordError:
    return CorruptRecordError(f"The decompressed records exceed {limit} bytes")


def _decompress(data: BytesLike, compression: int, limit: int) -> bytes | None:
    try:
        if compression == GZIP:
            return _gunzip(data, limit)
        if compression == SNAPPY:
            return _unsnappy(data, limit)
        if compression == LZ4:
            return _unlz4(data, limit)
        return _unzstd(data, limit)
    except ImportError:
        return None
    except CorruptRecordError:
        raise
    except Exception as e:  # each library raises its own error types for a bad body
        raise CorruptRecordError(f"Received exception when decompressing the records: {e!r}") from None


def _gunzip(data: BytesLike, limit: int) -> bytes:
    d = zlib.decompressobj(wbits=47)           # gzip or zlib header, as GZIPInputStream accepts gzip
    out = d.decompress(data, limit + 1)
    if len(out) > limit:
        raise _too_big(limit)
    if not d.eof or d.unused_data:
        raise CorruptRecordError("truncated gzip stream" if not d.eof else "bytes after the gzip stream")
    return out


def _unzstd(data: BytesLike, limit: int) -> bytes:
    import zstandard
    with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as r:
        out: bytes = r.read(limit + 1)
    if len(out) > limit:
        raise _too_big(limit)
    return out


def _unlz4(data: BytesLike, limit: int) -> bytes:
    import lz4.frame
    d = lz4.frame.LZ4FrameDecompressor()
    out: bytes = d.decompress(bytes(data), max_length=limit + 1)
    if len(out) > limit:
        raise _too_big(limit)
    if not d.eof:
        raise CorruptRecordError("truncated lz4 frame")
    return out


def _unsnappy(data: BytesLike, limit: int) -> bytes:
    """Kafka's snappy is xerial-framed (SnappyOutputStream) blocks of raw snappy; plain raw also read."""
    import cramjam
    data = bytes(data)
    blocks: list[bytes] = []
    if data[:8] == _XERIAL_MAGIC:
        pos = 16
        while pos < len(data):
            if pos + 4 > len(data):
                raise CorruptRecordError("truncated xerial snappy block length")
            n = _I32.unpack_from(data, pos)[0]
            if n < 0 or pos + 4 + n > len(data):
                raise CorruptRecordError(f"xerial snappy block of {n} bytes runs past the end")
            blocks.append(data[pos + 4:pos + 4 + n])
            pos += 4 + n
    else:
        blocks.append(data)
    out = bytearray()
    for block in blocks:
        # A raw snappy block starts with its uncompressed length: refuse before allocating it.
        declared, shift, i = 0, 0, 0
        while True:
            if i >= len(block) or i > 4:
                raise CorruptRecordError("bad snappy block length")
            declared |= (block[i] & 0x7F) << shift
            shift += 7
            if block[i] < 0x80:
                break
            i += 1
        if len(out) + declared > limit:
            raise _too_big(limit)
        out += bytes(cramjam.snappy.decompress_raw(block))
    return bytes(out)
