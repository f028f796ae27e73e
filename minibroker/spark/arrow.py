"""Decoded Fetch answers -> a pyarrow RecordBatch in the source's schema (vectorised: the
columns are numpy and Arrow arrays already, minibroker.spark.decode)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from minibroker.spark.decode import HEADER_TYPE, Decoded

__all__ = ["HEADER_TYPE", "TIMESTAMP", "to_record_batch"]

TIMESTAMP = pa.timestamp("us", tz="UTC")
NAMES = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def _joined(chunks: list[Decoded], name: str):
    parts = [getattr(c, name) for c in chunks]
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    return pa.concat_arrays(parts)


def to_record_batch(chunks: list[Decoded], topic: str, partition: int,
                    include_headers: bool) -> pa.RecordBatch:
    n = sum(len(c) for c in chunks)
    arrays = [
        _joined(chunks, "key"),
        _joined(chunks, "value"),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(_joined(chunks, "offset")),
        pa.array(_joined(chunks, "timestamp") * 1000, TIMESTAMP),
        pa.array(_joined(chunks, "ttype")),
    ]
    names = list(NAMES)
    if include_headers:
        arrays.append(_joined(chunks, "headers"))
        names.append("headers")
    arrays.append(pa.array(_joined(chunks, "epoch")))
    names.append("leaderEpoch")
    return pa.RecordBatch.from_arrays(arrays, names=names)
