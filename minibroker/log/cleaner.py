"""Log compaction (cleanup.policy=compact) of one in-memory PartitionLog, as Kafka's LogCleaner.

What is cleaned: the batches below `cleanable_end` — the high watermark, the active segment (the
log rolls a segment on append after segment.ms or segment.bytes, as Kafka; the active one is never
cleaned), the last batch, and min.compaction.lag.ms (a batch whose newest record is younger stays).
When: the dirty share of that range (bytes after the last cleaning's end / all its bytes) reaches
min.cleanable.dirty.ratio, or its oldest dirty batch is older than max.compaction.lag.ms, or a
tombstone's delete horizon has passed.
How: an offset map key -> latest offset over the range; every batch is rewritten keeping only
records that are the latest of their key, with its base offset, base timestamp, producer fields
and codec, the records' bytes unchanged (so their offset and timestamp deltas stay right), its
lastOffsetDelta cut to the last record kept, and a new CRC. A batch left empty is dropped.
Tombstones (null value) of the latest offset are kept until their batch's delete horizon
(set to now + delete.retention.ms at the first cleaning that keeps them, KIP-534; kept on the
StoredBatch here, not written into the batch) and dropped at the next cleaning after it.
Left alone: transactional and control batches (transactions own them), records without a key.
Each replica cleans its own copy with its own clock, like Kafka's per-broker cleaner.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

from minibroker.log.batch import (
    ATTRIBUTES_OFFSET, CONTROL_MASK, CRC_OFFSET, HEADER, HEADER_SIZE, LOG_OVERHEAD,
    TRANSACTIONAL_MASK, crc32c,
)
from minibroker.log.codecs import compress, decompress
from minibroker.log.config import LogConfig
from minibroker.log.partition_log import PartitionLog, StoredBatch
from minibroker.log.records_check import _varint

_LAST_OFFSET_DELTA_OFFSET = 23
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
NO_HORIZON = -1


class CleanResult(NamedTuple):
    batches_rewritten: int
    batches_dropped: int
    records_removed: int


_Record = tuple[int, int, int, "bytes | None", bool]


def _records(body: bytes) -> list[_Record]:
    """(start, end, offset delta, key, is tombstone) of each record of an uncompressed body."""
    out: list[_Record] = []
    pos, end = 0, len(body)
    while pos < end:
        rec_start = pos                                # the record's bytes include its length
        length, pos = _varint(body, pos, end)
        rec_end = pos + length
        pos += 1                                       # attributes
        pos = _varint(body, pos, rec_end)[1]           # timestamp delta
        delta, pos = _varint(body, pos, rec_end)
        key_len, pos = _varint(body, pos, rec_end)
        key = None
        if key_len >= 0:
            key = bytes(body[pos:pos + key_len])
            pos += key_len
        value_len = _varint(body, pos, rec_end)[0]
        out.append((rec_start, rec_end, delta, key, value_len < 0))
        pos = rec_end
    return out


def _cleanable(batch: StoredBatch) -> bool:
    return not batch.attributes & (TRANSACTIONAL_MASK | CONTROL_MASK)


def cleanable_end(log: PartitionLog, now_ms: int, high_watermark: int) -> int:
    """The offset cleaning stops before (see the module doc)."""
    end = min(high_watermark, log.active_segment_base, log.last_batch_base)
    lag = log.config.min_compaction_lag_ms
    if lag > 0:
        for batch in log.batches_from(log.log_start_offset):
            if batch.base_offset >= end:
                break
            if now_ms - batch.max_timestamp < lag:
                return batch.base_offset
    return end


def needs_cleaning(log: PartitionLog, now_ms: int, high_watermark: int) -> bool:
    config = log.config
    if not config.compacts or not log.batch_count:
        return False
    end = cleanable_end(log, now_ms, high_watermark)
    if 0 <= log.next_delete_horizon <= now_ms:
        return True
    dirty = total = 0
    oldest_dirty = None
    for batch in log.batches_from(log.log_start_offset):
        if batch.base_offset >= end:
            break
        total += batch.size
        if batch.base_offset >= log.first_dirty_offset:
            dirty += batch.size
            if oldest_dirty is None:
                oldest_dirty = batch.max_timestamp
    if not dirty:
        return False
    if oldest_dirty is not None and now_ms - oldest_dirty > config.max_compaction_lag_ms:
        return True
    return dirty / total >= config.min_cleanable_dirty_ratio


def clean(log: PartitionLog, now_ms: int, high_watermark: int) -> CleanResult:
    """Compact [log start, cleanable_end) of `log` (see the module doc)."""
    end = cleanable_end(log, now_ms, high_watermark)
    batches = [b for b in log.batches_from(log.log_start_offset) if b.base_offset < end]
    decoded: list[tuple[bytes, list[_Record]] | None] = []
    latest: dict[bytes, int] = {}
    for batch in batches:
        if not _cleanable(batch):
            decoded.append(None)
            continue
        body = decompress(batch.data[HEADER_SIZE:batch.size], batch.attributes & 0x07)
        records = _records(body)
        decoded.append((body, records))
        for _, _, delta, key, _ in records:
            if key is not None:
                latest[key] = batch.base_offset + delta
    replacements: dict[int, StoredBatch | None] = {}
    removed = rewritten = dropped = 0
    horizon_min = NO_HORIZON
    retention = log.config.delete_retention_ms
    for batch, item in zip(batches, decoded):
        if item is None:
            continue
        body, records = item
        horizon = batch.delete_horizon
        keep = []
        tombstones = False
        for rec in records:
            _, _, delta, key, tombstone = rec
            if key is not None and latest[key] != batch.base_offset + delta:
                continue
            if tombstone and key is not None:
                if horizon != NO_HORIZON and now_ms >= horizon:
                    continue
                tombstones = True
            keep.append(rec)
        if tombstones and horizon == NO_HORIZON:
            horizon = now_ms + retention
        if tombstones:
            horizon_min = horizon if horizon_min == NO_HORIZON else min(horizon_min, horizon)
        if len(keep) == len(records):
            batch.delete_horizon = horizon if tombstones else NO_HORIZON
            continue
        removed += len(records) - len(keep)
        if not keep:
            replacements[batch.base_offset] = None
            dropped += 1
            continue
        replacement = _rewrite(batch, body, keep, log.config)
        replacement.delete_horizon = horizon if tombstones else NO_HORIZON
        replacements[batch.base_offset] = replacement
        rewritten += 1
    if replacements:
        log.replace_batches(replacements)
    log.first_dirty_offset = max(log.first_dirty_offset, end)
    log.next_delete_horizon = horizon_min
    return CleanResult(rewritten, dropped, removed)


def _rewrite(batch: StoredBatch, body: bytes, keep: list[_Record], config: LogConfig) -> StoredBatch:
    records = b"".join(body[start:end] for start, end, _, _, _ in keep)
    codec = batch.attributes & 0x07
    level = {1: config.compression_gzip_level, 3: config.compression_lz4_level,
             4: config.compression_zstd_level}.get(codec)
    out = bytearray(batch.data[:HEADER_SIZE])
    out += compress(records, codec, level)
    _INT32.pack_into(out, 8, len(out) - LOG_OVERHEAD)
    _INT32.pack_into(out, _LAST_OFFSET_DELTA_OFFSET, keep[-1][2])
    _INT32.pack_into(out, HEADER_SIZE - 4, len(keep))
    _UINT32.pack_into(out, CRC_OFFSET, crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return StoredBatch(out, _header(out), batch.base_offset, batch.leader_epoch,
                       batch.max_timestamp, batch.attributes)


class _Header(NamedTuple):
    last_offset_delta: int
    size: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


def _header(buf: bytearray) -> _Header:
    f = HEADER.unpack_from(buf, 0)
    return _Header(f[6], len(buf), f[9], f[10], f[11])
