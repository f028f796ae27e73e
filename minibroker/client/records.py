"""Record batch encoding and decoding for the reference client (kafka-python's record code).

`encode_batch` writes one v2 batch with any codec kafka-python has (gzip always; snappy, lz4, zstd
when their libraries are installed). `decode_records` walks fetched bytes with kafka-python's
`MemoryRecords` (which decompresses), drops control batches and records before `fetch_offset`, and
tells the caller where the next fetch starts (the end of the last whole batch seen).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

CODECS = {None: 0, "none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def codec_id(compression: str | None) -> int:
    try:
        return CODECS[compression]
    except KeyError:
        raise ValueError(f"unknown compression {compression!r}; one of "
                         f"{sorted(k for k in CODECS if k)}") from None


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
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
                 producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """One v2 batch from [(key, value, headers, timestamp_ms)], offsets 0..n-1."""
    builder = DefaultRecordBatchBuilder(2, compression, False, producer_id, producer_epoch,
                                        base_sequence, 1 << 30)
    for i, (key, value, headers, ts) in enumerate(records):
        builder.append(i, ts, key, value, list(headers or ()))
    return bytes(builder.build())


def estimate_size(key: bytes | None, value: bytes | None, headers) -> int:
    n = 21 + (len(key) if key else 0) + (len(value) if value else 0)
    for h_key, h_value in headers or ():
        n += 2 + len(h_key) + (len(h_value) if h_value else 0)
    return n


def decode_records(topic: str, partition: int, data: bytes | None, fetch_offset: int,
                   ) -> tuple[list[ConsumerRecord], int]:
    """Records at offsets >= fetch_offset, and the offset to fetch next (>= fetch_offset)."""
    out: list[ConsumerRecord] = []
    next_offset = fetch_offset
    if not data:
        return out, next_offset
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        if batch.next_offset <= fetch_offset:
            continue
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
