"""Decoded column lists -> a pyarrow RecordBatch in the source's schema (vectorised, no per-row work
except the headers column, which only `includeHeaders=true` asks for)."""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from minibroker.spark._kafka import Columns

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TIMESTAMP = pa.timestamp("us", tz="UTC")


def _runs(runs: list[tuple[int, int]], n: int) -> pa.Array:
    if not runs:
        return pa.array(np.zeros(n, np.int32))
    counts = np.fromiter((c for c, _ in runs), np.int64, len(runs))
    values = np.fromiter((v for _, v in runs), np.int32, len(runs))
    return pa.array(np.repeat(values, counts))


def to_record_batch(cols: Columns, topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
    n = len(cols)
    ts_ms = np.fromiter(cols.timestamp, np.int64, n)
    arrays = [
        pa.array(cols.key, pa.binary()),
        pa.array(cols.value, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(np.fromiter(cols.offset, np.int64, n)),
        pa.array(ts_ms * 1000, TIMESTAMP),
        _runs(cols.ttype, n),
    ]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if include_headers:
        arrays.append(pa.array([[{"key": k, "value": v} for k, v in h] for h in cols.headers],
                               HEADER_TYPE))
        names.append("headers")
    arrays.append(_runs(cols.epoch, n))
    names.append("leaderEpoch")
    return pa.RecordBatch.from_arrays(arrays, names=names)
