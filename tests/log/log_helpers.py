"""Shared helpers for the log tests: client-style batches from kafka-python's own builder."""
from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minibroker.log.config import LogConfig
from minibroker.log.partition_log import PartitionLog


class FixedClock:
    def __init__(self, now: int = 1_700_000_000_000) -> None:
        self.now = now

    def now_ms(self) -> int:
        return self.now


def client_batch(values, *, timestamps=None, ts: int = 1000, compression: int = 0, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1, keys=None,
                 transactional: bool = False) -> bytes:
    """A batch as a producer sends it (base offset 0, leader epoch 0)."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=base_sequence, batch_size=1 << 24)
    for i, value in enumerate(values):
        key = keys[i] if keys else None
        stamp = timestamps[i] if timestamps else ts
        assert builder.append(i, stamp, key, value, [("h", b"v")]) is not None
    return bytes(builder.build())


def decode(view) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(offset, timestamp, key, value) of every record of one batch."""
    return [(r.offset, r.timestamp, r.key, r.value) for r in DefaultRecordBatch(bytes(view))]


def new_log(**config) -> PartitionLog:
    return PartitionLog("t", 0, LogConfig(**config), FixedClock())
