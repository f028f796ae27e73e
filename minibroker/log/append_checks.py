"""The topic-config checks and rewrites Kafka's LogValidator makes on a client's batch, beyond
records_check's structure checks. Each runs only when its config asks for it, so the default
topic's append stays a header-only, zero-copy one:

- cleanup.policy=compact: every record needs a key, else INVALID_RECORD with one record error per
  keyless record (KIP-467; Produce v8+ answers them in record_errors).
- message.timestamp.type=CreateTime and message.timestamp.{before,after}.max.ms: a record whose
  timestamp is further from the broker's clock is INVALID_TIMESTAMP with its record errors. The
  batch header's first and max timestamps are compared first; records are read only when one is
  out of bounds (to name them). Only once a bound is set on the topic or the broker
  (LogConfig.timestamp_bounds_set): Kafka 4.0's default after.max.ms (one hour) is described but
  not enforced alone, since a seeded cluster's clock is not its clients'.
- compression.type other than producer: a batch in another codec is recompressed into the
  topic's (records unchanged, new CRC), at the topic's compression.*.level.
"""
from __future__ import annotations

import struct
from typing import Any, Iterable, NoReturn

from kafka.errors import InvalidRecordError, InvalidTimestampError
from kafka.record.default_records import DefaultRecordBatch

from minibroker.log.batch import (
    ATTRIBUTES_OFFSET, COMPRESSION_MASK, CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, NO_TIMESTAMP,
    BatchHeader, crc32c, parse_batches,
)
from minibroker.log.codecs import CODEC_IDS, compress, decompress
from minibroker.log.config import LogConfig

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_MAX_SHOWN = 3          # Kafka shows at most the first three record errors in the message


class RecordErrors:
    """Mixed into the raised error: the (batch index, message) of each bad record."""
    record_errors: list[tuple[int, str]]


# kafka-python's errors are Any to mypy (untyped), which --strict will not let a class extend.
class InvalidRecordsError(InvalidRecordError, RecordErrors):  # type: ignore[misc]
    pass


class InvalidTimestampsError(InvalidTimestampError, RecordErrors):  # type: ignore[misc]
    pass


def _raise(cls: type[InvalidRecordsError] | type[InvalidTimestampsError],
           errors: list[tuple[int, str]]) -> NoReturn:
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:_MAX_SHOWN])
    e = cls(f"One or more records have been rejected due to {len(errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]")
    e.record_errors = errors
    raise e


def check_keys(view: memoryview, h: BatchHeader, topic_partition: str) -> None:
    """Compacted topics: refuse records without a key."""
    errors = [(i, f"Compacted topic cannot accept message without key in topic partition "
                  f"{topic_partition}.")
              for i, r in enumerate(_records(view, h)) if r.key is None]
    if errors:
        _raise(InvalidRecordsError, errors)


def check_timestamps(view: memoryview, h: BatchHeader, config: LogConfig, now_ms: int) -> None:
    """CreateTime: record timestamps within [now - before.max.ms, now + after.max.ms]."""
    lo = now_ms - config.message_timestamp_before_max_ms
    hi = now_ms + config.message_timestamp_after_max_ms
    first = h.base_timestamp
    if lo <= first and h.max_timestamp <= hi or h.max_timestamp == NO_TIMESTAMP:
        return
    errors = [(i, f"Timestamp {r.timestamp} of message with offset {i} is out of range. The "
                  f"timestamp should be within [{lo}, {hi}]")
              for i, r in enumerate(_records(view, h))
              if r.timestamp != NO_TIMESTAMP and not lo <= r.timestamp <= hi]
    if errors:
        _raise(InvalidTimestampsError, errors)


def recompress(view: memoryview, h: BatchHeader, config: LogConfig
               ) -> tuple[bytearray, BatchHeader] | None:
    """The batch in the topic's compression.type, or None when it already is in it."""
    target = CODEC_IDS[config.compression_type]
    codec = h.attributes & COMPRESSION_MASK
    if codec == target:
        return None
    data = view[h.offset_in_buf:h.offset_in_buf + h.size]
    records = decompress(data[HEADER_SIZE:], codec)
    level = {1: config.compression_gzip_level, 3: config.compression_lz4_level,
             4: config.compression_zstd_level}.get(target)
    out = bytearray(data[:HEADER_SIZE])
    out += compress(records, target, level)
    _INT32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _INT16.pack_into(out, ATTRIBUTES_OFFSET, (h.attributes & ~COMPRESSION_MASK) | target)
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    [header] = parse_batches(out)
    return out, header


def _records(view: memoryview, h: BatchHeader) -> Iterable[Any]:
    batch: Iterable[Any] = DefaultRecordBatch(bytes(view[h.offset_in_buf:h.offset_in_buf + h.size]))
    return batch
