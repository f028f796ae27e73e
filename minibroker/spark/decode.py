"""The source's hot path, vectorised: a Fetch answer's v2 record batches -> Arrow columns.

Per Fetch answer, with no per-record Python object:
- batch headers are read in Python (one `struct` call a batch); control batches are skipped (as
  every Kafka consumer does), compressed ones decompressed, and every selected batch's records
  area is joined into one buffer;
- a record's start depends on the previous record's length, so one tight Python loop per record
  walks the length varints (`_record_starts`, ~0.15 us a record; the only per-record Python);
- every other field (timestamp and offset deltas, key and value lengths, the header count) is
  decoded for all records at once by numpy (`_varints_at`), and the key and value columns are cut
  from the buffer by one Arrow `take` (`_binary_at`), which copies each value once, in C++.
Only records that carry headers, and only with `includeHeaders=true`, are decoded one by one.
Pre-v2 message sets (magic 0 and 1) go through kafka-python's reader (`legacy`), a record at a time.
"""
from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from kafka import codec as kafka_codec
from kafka.record.memory_records import MemoryRecords

from minibroker.protocol.varint import read_varint

_HEAD = struct.Struct(">qiibIhiqqqhii")      # a v2 batch header: 61 bytes
_HEAD_SIZE = 61
_CONTROL, _LOG_APPEND_TIME, _CODEC = 0x20, 0x08, 0x07
_PAD = 16                                      # zero bytes after the buffer: gathers stay inside
_DECOMPRESS = {1: kafka_codec.gzip_decode, 2: kafka_codec.snappy_decode,
               3: kafka_codec.lz4_decode, 4: kafka_codec.zstd_decode}
HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


class CorruptRecordError(ValueError):
    """A batch's records do not add up to its header (length, count)."""


class Legacy(Exception):
    """The answer holds a pre-v2 message set: decode it with kafka-python's reader."""


@dataclass
class Decoded:
    """The records of one Fetch answer with fetch_offset <= offset < end, as columns."""
    key: pa.Array
    value: pa.Array
    offset: np.ndarray            # int64
    timestamp: np.ndarray         # int64, ms
    ttype: np.ndarray             # int32
    epoch: np.ndarray             # int32
    headers: pa.Array | None

    def __len__(self) -> int:
        return len(self.offset)


@functools.lru_cache(maxsize=None)
def _steps() -> list:
    """For a record starting with bytes b, c (index b | c << 8): its whole size (length varint
    plus length) when the length varint takes one or two bytes; None otherwise (or negative)."""
    table: list = [None] * 65536
    for b in range(0x80):
        if not b & 1:
            for c in range(256):
                table[b | c << 8] = 1 + (b >> 1)
    for b in range(0x80, 0x100):
        for c in range(0x80):
            z = (b & 0x7F) | (c << 7)
            if not z & 1:
                table[b | c << 8] = 2 + (z >> 1)
    return table


def _wide_step(buf: bytes, pos: int) -> int:
    length, after = read_varint(buf, pos)
    if length < 0:
        raise CorruptRecordError(f"negative record length {length} at {pos}")
    return after - pos + length


def _record_starts(buf: bytes, pos: int, end: int, out: list) -> None:
    """Append the start of every record in buf[pos:end] (records are length-prefixed)."""
    steps, wide, add = _steps(), _wide_step, out.append
    while pos < end:
        add(pos)
        pos += steps[buf[pos] | buf[pos + 1] << 8] or wide(buf, pos)
    if pos != end:
        raise CorruptRecordError(f"records overrun their batch ({pos} > {end})")


def _varints_at(u8: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(zigzag-decoded value, width) of the varint at each position (up to 10 bytes)."""
    b = u8[pos].astype(np.uint64)
    z = b & np.uint64(0x7F)
    width = np.ones(len(pos), np.int64)
    more = np.flatnonzero(b & np.uint64(0x80))
    for i in range(1, 10):
        if not len(more):
            break
        b = u8[pos[more] + i].astype(np.uint64)
        z[more] |= (b & np.uint64(0x7F)) << np.uint64(7 * i)
        width[more] += 1
        more = more[(b & np.uint64(0x80)) != 0]
    if len(more):
        raise CorruptRecordError("a varint longer than 10 bytes")
    return (z >> np.uint64(1)).astype(np.int64) ^ -(z & np.uint64(1)).astype(np.int64), width


def _binary_at(buf: pa.Buffer, start: np.ndarray, length: np.ndarray) -> pa.Array:
    """A binary column of buf[start:start + length] (length -1: null), the regions in increasing,
    non-overlapping order: an array over buf alternating the regions and the gaps between them,
    of which `take` keeps the regions (one C++ copy)."""
    n = len(start)
    if not n:
        return pa.array([], pa.binary())
    valid = length >= 0
    bounds = np.empty(2 * n, np.int64)
    bounds[0::2] = start
    bounds[1::2] = start + np.where(valid, length, 0)
    if bounds[-1] >= 1 << 31:
        raise CorruptRecordError("a fetched buffer over 2 GiB")
    mask = np.ones(2 * n - 1, bool)
    mask[0::2] = valid
    nulls = None if valid.all() else pa.py_buffer(np.packbits(mask, bitorder="little"))
    alternating = pa.Array.from_buffers(pa.binary(), 2 * n - 1,
                                        [nulls, pa.py_buffer(bounds.astype(np.int32)), buf])
    return alternating.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int32)))


def _select(data: bytes, fetch_offset: int, end: int) -> tuple[list, list, int]:
    """The records areas of the batches holding records in [fetch_offset, end), their fields
    (record count, base offset, first ts, max ts, timestamp type, leader epoch), and the next
    offset to fetch."""
    parts, info = [], []
    nxt = fetch_offset
    pos, size = 0, len(data)
    view = memoryview(data)
    while pos + _HEAD_SIZE <= size:
        base, length, epoch, magic, _, attrs, last_delta, first_ts, max_ts, _, _, _, count = \
            _HEAD.unpack_from(data, pos)
        after = pos + 12 + length
        if after > size:
            break                                  # a partial batch ends the answer
        if magic != 2:
            raise Legacy()
        if base + last_delta >= fetch_offset:
            nxt = max(nxt, base + last_delta + 1)
            if not attrs & _CONTROL and base < end:
                body = view[pos + _HEAD_SIZE:after]
                codec = attrs & _CODEC
                parts.append(_DECOMPRESS[codec](bytes(body)) if codec else body)
                info.append((count, base, first_ts, max_ts,
                             1 if attrs & _LOG_APPEND_TIME else 0, epoch))
        pos = after
    return parts, info, nxt


def _starts(buf: bytes, parts: list, info: list) -> np.ndarray:
    """Every record's start in buf (the parts joined), checked against each batch's count."""
    starts: list = []
    pos = 0
    for part, (count, base, *_) in zip(parts, info):
        before = len(starts)
        _record_starts(buf, pos, pos + len(part), starts)
        if len(starts) - before != count:
            raise CorruptRecordError(f"the batch at offset {base} holds {len(starts) - before} "
                                     f"records, its header says {count}")
        pos += len(part)
    return np.array(starts, np.int64)


def decode(data: bytes, fetch_offset: int, end: int, with_headers: bool
           ) -> tuple[Decoded | None, int]:
    """The records of a Fetch answer's `data` with fetch_offset <= offset < end (None if there
    are none), and the offset to fetch next. Raises Legacy for pre-v2 message sets."""
    parts, info, nxt = _select(data, fetch_offset, end)
    if not parts:
        return None, nxt
    buf = b"".join(parts) + bytes(_PAD)
    starts = _starts(buf, parts, info)
    u8 = np.frombuffer(buf, np.uint8)
    fields = np.array(info, np.int64)
    per = np.repeat(np.arange(len(info)), fields[:, 0])
    pos = starts
    length, w = _varints_at(u8, pos)
    rec_end = pos + w + length
    pos = pos + w + 1                                   # after the attributes byte
    ts_delta, w = _varints_at(u8, pos)
    pos = pos + w
    off_delta, w = _varints_at(u8, pos)
    pos = pos + w
    key_len, w = _varints_at(u8, pos)
    key_at = pos + w
    pos = key_at + np.maximum(key_len, 0)
    value_len, w = _varints_at(u8, pos)
    value_at = pos + w
    pos = value_at + np.maximum(value_len, 0)
    if (pos >= rec_end).any() or (key_len < -1).any() or (value_len < -1).any():
        raise CorruptRecordError("a record's key or value runs past its end")
    offset = fields[per, 1] + off_delta
    keep = np.flatnonzero((offset >= fetch_offset) & (offset < end))
    if not len(keep):
        return None, nxt
    per, ts_delta = per[keep], ts_delta[keep]
    log_append = fields[per, 4] == 1
    timestamp = np.where(log_append, fields[per, 3], fields[per, 2] + ts_delta)
    arrow_buf = pa.py_buffer(buf)
    headers = _headers(buf, pos[keep], u8) if with_headers else None
    return Decoded(_binary_at(arrow_buf, key_at[keep], key_len[keep]),
                   _binary_at(arrow_buf, value_at[keep], value_len[keep]),
                   offset[keep], timestamp, fields[per, 4].astype(np.int32),
                   fields[per, 5].astype(np.int32), headers), nxt


def _headers(buf: bytes, at: np.ndarray, u8: np.ndarray) -> pa.Array:
    """The headers column: a list per record; only records whose header count is not 0 are
    decoded in Python."""
    counts = np.zeros(len(at), np.int64)
    keys: list = []
    values: list = []
    for i in np.flatnonzero(u8[at]).tolist():
        count, pos = read_varint(buf, int(at[i]))
        if count < 0:
            raise CorruptRecordError(f"header count {count}")
        counts[i] = count
        for _ in range(count):
            n, pos = read_varint(buf, pos)
            keys.append(buf[pos:pos + n].decode())
            n, pos = read_varint(buf, pos + n)
            values.append(None if n < 0 else buf[pos:pos + n])
            pos += max(n, 0)
    offsets = np.zeros(len(at) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    items = pa.StructArray.from_arrays([pa.array(keys, pa.string()), pa.array(values, pa.binary())],
                                       fields=list(HEADER_TYPE.value_type))
    return pa.ListArray.from_arrays(pa.array(offsets), items, type=HEADER_TYPE)


def legacy(data: bytes, fetch_offset: int, end: int, with_headers: bool
           ) -> tuple[Decoded | None, int]:
    """`decode` through kafka-python's reader, a record at a time: for pre-v2 message sets
    (magic 0 has no timestamps: -1, as Kafka's NO_TIMESTAMP and NO_TIMESTAMP_TYPE)."""
    nxt = fetch_offset
    rows: list = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        epoch = -1
        if hasattr(batch, "next_offset"):            # v2 (kafka-python's magic() is wrong for v0/1)
            nxt = max(nxt, batch.next_offset)
            if batch.is_control_batch:
                continue
            epoch = batch.leader_epoch
        ttype = batch.timestamp_type
        for r in batch:
            nxt = max(nxt, r.offset + 1)
            if fetch_offset <= r.offset < end:
                rows.append((r.offset, -1 if r.timestamp is None else r.timestamp,
                             -1 if ttype is None else ttype, epoch, r.key, r.value,
                             [{"key": k, "value": v} for k, v in r.headers]))
    if not rows:
        return None, nxt
    offset, ts, ttypes, epochs, key, value, headers = zip(*rows)
    return Decoded(pa.array(key, pa.binary()), pa.array(value, pa.binary()),
                   np.array(offset, np.int64), np.array(ts, np.int64), np.array(ttypes, np.int32),
                   np.array(epochs, np.int32),
                   pa.array(headers, HEADER_TYPE) if with_headers else None), nxt


def decode_answer(data, fetch_offset: int, end: int, with_headers: bool
                  ) -> tuple[Decoded | None, int]:
    """A Fetch answer's records: vectorised for v2 batches, kafka-python's reader otherwise."""
    data = bytes(data)
    try:
        return decode(data, fetch_offset, end, with_headers)
    except Legacy:
        return legacy(data, fetch_offset, end, with_headers)
