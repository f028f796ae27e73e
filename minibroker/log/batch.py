"""Kafka record batch v2 (magic 2): header parsing, validation and in-place patching.

Layout of one batch (61-byte header, then the records):

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 | crc uint32 |
    attributes int16 | lastOffsetDelta int32 | baseTimestamp int64 | maxTimestamp int64 |
    producerId int64 | producerEpoch int16 | baseSequence int32 | recordsCount int32 | records...

`batchLength` counts the bytes after itself, so a batch occupies 12 + batchLength bytes. The CRC32C
covers attributes .. end of batch, so baseOffset and partitionLeaderEpoch can be patched by the broker
without touching it (`patch_batch`). Only per-batch header work happens here, never per-record work,
except in `build_batch`, the small encoder used for tests and control batches.

Errors, as Kafka reports them for a Produce request v3+:
- lengths out of range, a partial batch, unknown magic, bad CRC -> `CorruptRecordError` (CORRUPT_MESSAGE)
- magic 0/1 -> `InvalidRecordError` (INVALID_RECORD): Kafka's ProduceRequest.validateRecords throws
  InvalidRecordException("... only allowed to contain record batches with magic version 2")
- client-origin rules (`validate_client_batch`) -> `InvalidRecordError`, as Kafka's LogValidator.
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple, Sequence

from kafka.codec import gzip_encode
from kafka.errors import CorruptRecordError, InvalidRecordError
from kafka.record.default_records import DefaultRecordBatch

from minibroker.protocol.varint import write_varint as _varint

try:  # the C implementation (pure Python costs ~130 ms per MiB), called directly: no wrapper call
    from crc32c import crc32c as crc32c     # re-exported: append_checks, cleaner, metadata_store
except ImportError:  # pragma: no cover - fallback only
    import google_crc32c

    # Takes only the data: none of our calls passes crc32c's `value` or `gil_release_mode`.
    def crc32c(data: bytes | bytearray | memoryview) -> int:  # type: ignore[misc]
        crc: int = google_crc32c.value(bytes(data))
        return crc


HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size                  # 61
LOG_OVERHEAD = 12                          # baseOffset + batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
CREATE_TIME = 0
LOG_APPEND_TIME = 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    offset_in_buf: int          # where the batch starts in the parsed buffer
    size: int                   # 12 + batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.last_offset_delta)


def next_offset(batch: bytes | bytearray | memoryview) -> int:
    """The offset after this stored batch (base offset + last offset delta + 1), header only."""
    end: int = _INT64.unpack_from(batch, 0)[0] + _INT32.unpack_from(batch, 23)[0] + 1
    return end


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers wrap from int32 max to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def parse_batches(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True,
                  allow_partial_tail: bool = False) -> list[BatchHeader]:
    """Walk a records buffer and return the header of every batch, validating each one.

    `allow_partial_tail=True` ignores a trailing partial batch (a fetch response may end with one);
    produce input must not have one. `verify_crc=False` skips the CRC (follower fast path).
    """
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    end = len(view)
    pos = 0
    headers: list[BatchHeader] = []
    unpack = HEADER.unpack_from
    while pos < end:
        remaining = end - pos
        if remaining < LOG_OVERHEAD:
            if allow_partial_tail:
                break
            raise CorruptRecordError(f"{remaining} trailing bytes at position {pos} are too short for a batch")
        batch_length = _INT32.unpack_from(view, pos + 8)[0]
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"batch at position {pos} has length {batch_length}, less than the minimum {MIN_BATCH_LENGTH}")
        size = LOG_OVERHEAD + batch_length
        if size > remaining:
            if allow_partial_tail:
                break
            raise CorruptRecordError(
                f"batch at position {pos} of size {size} extends past the end of the buffer ({remaining} bytes left)")
        magic = view[pos + MAGIC_OFFSET]
        if magic != MAGIC:
            if magic in (0, 1):
                raise InvalidRecordError(
                    f"Produce requests are only allowed to contain record batches with magic version 2 (got {magic})")
            raise CorruptRecordError(f"batch at position {pos} has unknown magic {magic}")
        fields: tuple[int, int, int, int, int, int, int, int, int, int, int, int, int] = \
            unpack(view, pos)
        if verify_crc:
            _check_crc(view, pos, size, fields[4])
        if fields[6] < 0:
            raise CorruptRecordError(f"batch at position {pos} has negative lastOffsetDelta {fields[6]}")
        if fields[12] < 0:
            raise CorruptRecordError(f"batch at position {pos} has negative record count {fields[12]}")
        headers.append(BatchHeader(*fields, pos, size))
        pos += size
    return headers


def _check_crc(view: memoryview, pos: int, size: int, crc: int) -> None:
    computed = crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size])
    if computed != crc:
        raise CorruptRecordError(
            f"batch at position {pos} is corrupt (stored crc = {crc}, computed crc = {computed})")


def check_crc(view: memoryview, header: BatchHeader) -> None:
    """The CRC check parse_batches(verify_crc=True) makes, for one batch it parsed unchecked."""
    _check_crc(view, header.offset_in_buf, header.size, header.crc)


def validate_client_batch(header: BatchHeader) -> None:
    """Kafka's LogValidator checks for batches a client produced (AppendOrigin.CLIENT)."""
    if header.attributes & CONTROL_MASK:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header.records_count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {header.records_count}")
    if header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"Inconsistent batch offset range ({header.last_offset_delta + 1}) and record count "
            f"({header.records_count})")


def patch_batch(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Write baseOffset and partitionLeaderEpoch in place; both lie outside the CRC."""
    _INT64.pack_into(buf, pos, base_offset)
    _INT32.pack_into(buf, pos + LEADER_EPOCH_OFFSET, leader_epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with maxTimestamp = timestamp_ms and recompute its CRC
    (Kafka's DefaultRecordBatch.setMaxTimestamp). Only for topics with message.timestamp.type=LogAppendTime."""
    attributes = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0]
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    size = LOG_OVERHEAD + _INT32.unpack_from(buf, pos + 8)[0]
    view = memoryview(buf)
    try:
        _UINT32.pack_into(buf, pos + CRC_OFFSET, crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size]))
    finally:
        view.release()


# -- encoding (tests, control batches) ---------------------------------------------------------------

def _nullable_bytes(data: bytes | None, out: bytearray) -> None:
    if data is None:
        _varint(-1, out)
    else:
        _varint(len(data), out)
        out += data


# (key, value, headers) or (key, value, headers, timestamp_ms)
Headers = Sequence[tuple[str, "bytes | None"]]
Record = tuple[bytes | None, bytes | None, Headers] | tuple[bytes | None, bytes | None, Headers, int]


def build_batch(records: Sequence[Record], base_offset: int = 0, *, timestamp: int = 0,
                compression: int = 0, producer_id: int = NO_PRODUCER_ID,
                producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                leader_epoch: int = -1, transactional: bool = False, control: bool = False,
                timestamp_type: int = CREATE_TIME) -> bytearray:
    """Encode one v2 batch. Each record is (key, value, headers) with headers a list of (str, bytes|None),
    optionally with a 4th element, its timestamp (default `timestamp`). compression: 0 none or 1 gzip."""
    if not records:
        raise ValueError("a batch needs at least one record")
    if compression not in (0, 1):
        raise ValueError("build_batch supports compression 0 (none) and 1 (gzip)")
    stamps = [r[3] if len(r) > 3 else timestamp for r in records]
    first_ts, max_ts = stamps[0], max(stamps)
    body = bytearray()
    for delta, (rec, ts) in enumerate(zip(records, stamps)):
        key, value, headers = rec[0], rec[1], rec[2]
        one = bytearray(b"\x00")                     # record attributes
        _varint(ts - first_ts, one)
        _varint(delta, one)
        _nullable_bytes(key, one)
        _nullable_bytes(value, one)
        _varint(len(headers), one)
        for h_key, h_value in headers:
            encoded = h_key.encode()
            _varint(len(encoded), one)
            one += encoded
            _nullable_bytes(h_value, one)
        _varint(len(one), body)
        body += one
    if compression == 1:
        body = bytearray(gzip_encode(bytes(body)))
    attributes = (compression | (timestamp_type << 3) | (TRANSACTIONAL_MASK if transactional else 0)
                  | (CONTROL_MASK if control else 0))
    out = bytearray(HEADER_SIZE) + body
    HEADER.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, leader_epoch, MAGIC, 0, attributes,
                     len(records) - 1, first_ts, max_ts, producer_id, producer_epoch, base_sequence,
                     len(records))
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(out[ATTRIBUTES_OFFSET:]))
    return out


def build_control_batch(commit: bool, producer_id: int, producer_epoch: int, *, coordinator_epoch: int = 0,
                        timestamp: int = 0, base_offset: int = 0) -> bytearray:
    """A transaction marker: key = (version 0, type 0 abort | 1 commit), value = (version 0, coordinator epoch)."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    return build_batch([(key, value, [])], base_offset, timestamp=timestamp, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=NO_SEQUENCE, transactional=True, control=True)


def record_timestamps(data: bytes | bytearray | memoryview) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of every record of one stored batch, decompressing if needed.

    The one place the log reads records (timestamp lookups); uses kafka-python's decoder. The fields
    inside an uncompressed client record are not validated on append (records_check), so a record
    that does not decode ends the walk with the batch's own (base offset, max timestamp)."""
    try:
        for record in DefaultRecordBatch(data):
            yield record.offset, record.timestamp
    except Exception:  # kafka-python raises assorted errors on a malformed record
        fields = HEADER.unpack_from(data, 0)
        yield fields[0], fields[8]
