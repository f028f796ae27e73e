"""Record batch encoding and decoding for the reference client (kafka-python's record code).

`encode_batch` writes one v2 batch with any codec kafka-python has (gzip always; snappy, lz4, zstd
when their libraries are installed). `decode_records` walks fetched bytes batch by batch, drops
control batches and records before `fetch_offset`, and tells the caller where the next fetch starts
(the end of the last whole batch seen). An uncompressed v2 batch's records are read in one loop here;
a compressed or pre-v2 batch goes through kafka-python's `MemoryRecords` (which decompresses), whose
pure-Python reader makes a record object and ~15 calls per record (docs/performance.md).
"""
from __future__ import annotations

import functools
import struct
from typing import Iterator, NamedTuple, Sequence

import crc32c
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from minibroker.protocol.varint import SMALL_UVARINTS, read_varint, uvarint_bytes

CODECS = {None: 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


# codec -> (whether kafka-python can use it here, the package it needs)
_CODEC_LIBS = {2: (kafka_codec.has_snappy, "python-snappy"), 3: (kafka_codec.has_lz4, "lz4"),
               4: (kafka_codec.has_zstd, "zstandard")}


class CodecNotInstalledError(ValueError):
    """compression.type names a codec whose library is not installed."""


def codec_id(compression: str | None) -> int:
    """The batch attribute of a compression.type; an unknown one, or one whose library is
    missing, raises here (at configuration), never later in a sender."""
    try:
        codec = CODECS[compression]
    except KeyError:
        raise ValueError(f"unknown compression {compression!r}; one of "
                         f"{sorted(k for k in CODECS if k)}") from None
    if codec in _CODEC_LIBS and not _CODEC_LIBS[codec][0]():
        raise CodecNotInstalledError(
            f"compression.type={compression} needs the {_CODEC_LIBS[codec][1]} package, which "
            f"is not installed: pip install 'minibroker[codecs]'")
    return codec


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerGroupMetadata(NamedTuple):
    """What a transactional producer's TxnOffsetCommit carries for KIP-447 fencing."""
    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class ConsumerRecord(NamedTuple):
    """Immutable, as before; a NamedTuple is built in one call, where a frozen dataclass set
    each of its nine fields through object.__setattr__ (~6 us a record here)."""
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int = -1


def encode_batch(records: Sequence[tuple], compression: int = 0, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 transactional: bool = False) -> bytes:
    """One v2 batch from [(key, value, headers, timestamp_ms)], offsets 0..n-1."""
    if compression == 0 and records:
        return _plain_batch(records, producer_id, producer_epoch, base_sequence,
                            _TRANSACTIONAL if transactional else 0)
    builder = DefaultRecordBatchBuilder(2, compression, transactional, producer_id, producer_epoch,
                                        base_sequence, 1 << 30)
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, ts, key, value, list(headers or ()))
    return bytes(builder.build())


def mark_transactional(batch: bytes) -> bytes:
    """`batch` with its transactional attribute set (and its CRC, which covers the attributes)."""
    b = bytearray(batch)
    struct.pack_into(">h", b, 21, struct.unpack_from(">h", b, 21)[0] | _TRANSACTIONAL)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def _zz(n: int) -> bytes:
    """A zigzag varint's bytes (a record's fields)."""
    z = (n << 1) ^ (n >> 63)
    return SMALL_UVARINTS[z] if z < 0x80 else uvarint_bytes(z)


_NULL = _zz(-1)
# Zigzag varints of 0 .. 8191 (offset deltas, lengths and timestamp deltas of most records),
# looked up rather than computed: ~0.7 us a record of function calls otherwise.
_ZZ = [_zz(n) for n in range(8192)]
_ZZ_LIMIT = len(_ZZ)


def _plain_batch(records: Sequence[tuple], producer_id: int, producer_epoch: int,
                 base_sequence: int, attributes: int = 0) -> bytes:
    """An uncompressed batch, its records written in one loop: the bytes kafka-python's builder
    writes (tests/client/test_records_decode.py) without its per-record checks and varint calls."""
    first_ts = records[0][3]
    max_ts = first_ts
    parts = []
    add = parts.append
    zz, limit = _ZZ, _ZZ_LIMIT
    for i, (key, value, headers, ts) in enumerate(records):
        if ts > max_ts:
            max_ts = ts
        d = ts - first_ts
        body = [b"\x00", zz[d] if 0 <= d < limit else _zz(d), zz[i] if i < limit else _zz(i)]
        if key is None:
            body.append(_NULL)
        else:
            body += (zz[len(key)] if len(key) < limit else _zz(len(key)), key)
        if value is None:
            body.append(_NULL)
        else:
            body += (zz[len(value)] if len(value) < limit else _zz(len(value)), value)
        if headers:
            body.append(_zz(len(headers)))
            for h_key, h_value in headers:
                raw = h_key.encode()
                body += (_zz(len(raw)), raw,
                         _NULL if h_value is None else _zz(len(h_value)), h_value or b"")
        else:
            body.append(b"\x00")
        rec = b"".join(body)
        add(zz[len(rec)] if len(rec) < limit else _zz(len(rec)))
        add(rec)
    return frame_batch(b"".join(parts), len(records), first_ts, max_ts, producer_id,
                       producer_epoch, base_sequence, attributes)


def frame_batch(records, count: int, first_ts: int, max_ts: int, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1, attributes: int = 0) -> bytes:
    """A v2 batch around `count` encoded records (offset deltas 0..count-1), compressed already
    when `attributes` names a codec."""
    tail = b"".join((_BATCH_TAIL.pack(attributes, count - 1, first_ts, max_ts, producer_id, producer_epoch,
                                      base_sequence, count), records))
    return _BATCH_START.pack(0, len(tail) + 9, 0, 2, crc32c.crc32c(tail)) + tail


_BATCH_START = struct.Struct(">qiibI")       # base offset, length, leader epoch, magic, CRC
_BATCH_TAIL = struct.Struct(">hiqqqhii")     # attributes .. record count (what the CRC covers)


def estimate_size(key: bytes | None, value: bytes | None, headers) -> int:
    n = 21 + (len(key) if key else 0) + (len(value) if value else 0)
    for h_key, h_value in headers or ():
        n += 2 + len(h_key) + (len(h_value) if h_value else 0)
    return n


_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")   # a v2 batch header: 61 bytes
_HEAD_SIZE = 61
_CONTROL, _TRANSACTIONAL, _LOG_APPEND_TIME, _CODEC = 0x20, 0x10, 0x08, 0x07


def decode_records(topic: str, partition: int, data: bytes | None, fetch_offset: int,
                   ) -> tuple[list[ConsumerRecord], int]:
    """Records at offsets >= fetch_offset, and the offset to fetch next (>= fetch_offset)."""
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    if not data:
        return out, next_offset
    data = bytes(data)
    for pos, end, (base, _, epoch, magic, _crc, attrs, last_delta, first_ts, max_ts, _pid, _pepoch,
                   _seq, _count) in _whole_batches(data):
        if magic != 2 or attrs & _CODEC:
            return _decode_generic(topic, partition, data[pos:], fetch_offset, out, next_offset)
        after = base + last_delta + 1
        if after > fetch_offset:
            next_offset = max(next_offset, after)
            if not attrs & _CONTROL:
                _plain_records(topic, partition, data, pos + _HEAD_SIZE, end, base, epoch,
                               1 if attrs & _LOG_APPEND_TIME else 0, first_ts, max_ts,
                               fetch_offset, out)
    return out, next_offset


def _whole_batches(data: bytes) -> Iterator[tuple[int, int, tuple]]:
    """(start, end, header fields) of each whole batch (a fetch may end with a partial one)."""
    pos, size = 0, len(data)
    while pos + _HEAD_SIZE <= size:
        head = _BATCH_HEAD.unpack_from(data, pos)
        end = pos + 12 + head[1]
        if end > size:
            return
        yield pos, end, head
        pos = end


def drop_aborted(records: list[ConsumerRecord], data: bytes, aborted) -> list[ConsumerRecord]:
    """read_committed: `records` without those of aborted transactions, as Kafka's fetcher does:
    going through the batches in order, a producer id joins the aborted set at its aborted
    transaction's first offset, its transactional batches are dropped while it is there, and its
    ABORT marker takes it out.  `aborted` is the Fetch response's [(producer_id, first_offset)]."""
    pending = sorted((a.first_offset, a.producer_id) for a in aborted)
    dropped: list[tuple[int, int]] = []
    pids: set[int] = set()
    data = bytes(data)
    for pos, _, head in _whole_batches(data):
        base, attrs, last_delta, pid = head[0], head[5], head[6], head[9]
        last = base + last_delta
        while pending and pending[0][0] <= last:
            pids.add(pending.pop(0)[1])
        if attrs & _CONTROL:
            if pid in pids and _is_abort_marker(data, pos + _HEAD_SIZE):
                pids.discard(pid)
        elif attrs & _TRANSACTIONAL and pid in pids:
            dropped.append((base, last))
    if not dropped:
        return records
    out, i = [], 0
    for r in records:                    # both in offset order
        while i < len(dropped) and dropped[i][1] < r.offset:
            i += 1
        if i == len(dropped) or r.offset < dropped[i][0]:
            out.append(r)
    return out


def _is_abort_marker(data: bytes, pos: int) -> bool:
    """A control batch's first record's key: version int16, type int16 (0 = ABORT, 1 = COMMIT)."""
    _, pos = read_varint(data, pos)                 # record length
    _, pos = read_varint(data, pos + 1)             # timestamp delta, after the attributes byte
    _, pos = read_varint(data, pos)                 # offset delta
    n, pos = read_varint(data, pos)
    return n >= 4 and struct.unpack_from(">hh", data, pos)[1] == 0


def _wide(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint of 3 bytes or more at pos: (value, its width)."""
    value, after = read_varint(data, pos)
    return value, after - pos


@functools.lru_cache(maxsize=None)
def _short_varints() -> list:
    """(value, width) of the zigzag varint starting with bytes b, c, at index b | c << 8, for
    the one- and two-byte varints (-4096 .. 4095: most fields of records under 8 KiB); None
    where it is longer. Built on first use (7 ms, 1.6 MB): a process that never reads records
    (a broker imports this module for TopicPartition) does not pay for it."""
    table: list = [None] * 65536
    for b in range(0x80):
        one = ((b >> 1) ^ -(b & 1), 1)
        for c in range(256):
            table[b | c << 8] = one
    for b in range(0x80, 0x100):
        for c in range(0x80):
            z = (b & 0x7F) | (c << 7)
            table[b | c << 8] = ((z >> 1) ^ -(z & 1), 2)
    return table



def _plain_records(topic: str, partition: int, data: bytes, pos: int, end: int, base: int,
                   epoch: int, ttype: int, first_ts: int, max_ts: int, fetch_offset: int,
                   out: list) -> None:
    """An uncompressed batch's records (key, value and header values as bytes). A field's varint
    is looked up by its first two bytes (`_short_varints`): a call per field cost ~0.2 us each.
    Every field but the last (the header count) has a byte after it inside the record."""
    log_append = ttype == 1
    make, cls = tuple.__new__, ConsumerRecord      # the NamedTuple without its __new__'s frame
    short, zig = _short_varints(), read_varint
    while pos < end:
        length, w = short[data[pos] | data[pos + 1] << 8] or _wide(data, pos)
        pos += w
        rec_end = pos + length
        pos += 1                                        # the record's attributes
        ts_delta, w = short[data[pos] | data[pos + 1] << 8] or _wide(data, pos)
        pos += w
        off_delta, w = short[data[pos] | data[pos + 1] << 8] or _wide(data, pos)
        pos += w
        if base + off_delta < fetch_offset:
            pos = rec_end
            continue
        n, w = short[data[pos] | data[pos + 1] << 8] or _wide(data, pos)
        pos += w
        key = None if n < 0 else data[pos:pos + n]
        if n > 0:
            pos += n
        n, w = short[data[pos] | data[pos + 1] << 8] or _wide(data, pos)
        pos += w
        value = None if n < 0 else data[pos:pos + n]
        if n > 0:
            pos += n
        headers = ()
        if data[pos]:                                   # a header count other than 0
            count, pos = zig(data, pos)
            hs = []
            for _ in range(count):
                n, pos = zig(data, pos)
                h_key = data[pos:pos + n].decode()
                n, pos = zig(data, pos + n)
                hs.append((h_key, None if n < 0 else data[pos:pos + n]))
                if n > 0:
                    pos += n
            headers = tuple(hs)
        out.append(make(cls, (topic, partition, base + off_delta,
                              max_ts if log_append else first_ts + ts_delta, ttype, key, value,
                              headers, epoch)))
        pos = rec_end


def batches_after(data: bytes, fetch_offset: int) -> Iterator:
    """kafka-python's record batches of `data` that end after `fetch_offset` (a Fetch answer
    starts at the batch holding the fetch offset, so the first may be partly before it)."""
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        if batch.next_offset > fetch_offset:
            yield batch


def _decode_generic(topic: str, partition: int, data: bytes, fetch_offset: int,
                    out: list[ConsumerRecord], next_offset: int
                    ) -> tuple[list[ConsumerRecord], int]:
    """The rest of `data` through kafka-python's reader (compressed or pre-v2 batches)."""
    for batch in batches_after(data, fetch_offset):
        next_offset = max(next_offset, batch.next_offset)
        if batch.is_control_batch:
            continue
        epoch = batch.leader_epoch if hasattr(batch, "leader_epoch") else -1
        ttype = batch.timestamp_type
        for rec in batch:
            if rec.offset < fetch_offset:
                continue
            out.append(ConsumerRecord(topic, partition, rec.offset, rec.timestamp, ttype,
                                      rec.key, rec.value,
                                      tuple((k, v) for k, v in rec.headers), epoch))
    return out, next_offset
