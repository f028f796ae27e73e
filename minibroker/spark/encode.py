"""The sink's hot path, vectorised: Arrow columns -> partitions -> Kafka v2 record batches.

Per Arrow batch, with numpy and pyarrow kernels and no Python loop over records:
- `murmur2` hashes a binary column (Kafka's `Utils.murmur2`, seed 0x9747b28c) four bytes at a
  time across all keys, and `linear_hashing` applies KIP-253 over (N, U) like
  minibroker.partitioning.partition_for_hash;
- `encode_records` writes every record's bytes (length, attributes, timestamp and offset deltas,
  key, value, headers) into one binary array with `binary_join_element_wise`, in the order the
  rows are to be sent, so a batch's records are one slice of that array's data buffer.
Only the headers column, when present, is encoded row by row (and only its non-null rows).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from minibroker.client.records import _zz

_M = np.uint32(0x5BD1E995)
_SEED = np.uint32(0x9747B28C)


def binary_column(col: pa.Array) -> pa.Array:
    """A string/binary column as pa.binary() (zero-copy for string)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not pa.types.is_binary(col.type):
        col = col.cast(pa.binary())
    return col


def _offsets_and_data(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(starts/ends as int64 of len n+1, the data bytes) of a pa.binary() array."""
    _, off, data = col.buffers()
    offsets = np.frombuffer(off, np.int32, len(col) + 1, col.offset * 4).astype(np.int64)
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return offsets, raw


def murmur2(keys: pa.Array) -> np.ndarray:
    """Kafka's murmur2 of every (non-null) key, as uint32."""
    offsets, data = _offsets_and_data(keys)
    start, length = offsets[:-1], np.diff(offsets)
    n = len(length)
    h = _SEED ^ length.astype(np.uint32)
    blocks = length // 4
    order = np.argsort(-blocks, kind="stable")          # rows with a j-th block form a prefix
    sorted_blocks = blocks[order]
    data = np.concatenate([data, np.zeros(4, np.uint8)])     # tail reads stay in bounds
    for j in range(int(sorted_blocks[0]) if n else 0):
        rows = order[:np.searchsorted(-sorted_blocks, -j, side="left")]
        p = start[rows] + 4 * j
        k = (data[p].astype(np.uint32) | data[p + 1].astype(np.uint32) << 8
             | data[p + 2].astype(np.uint32) << 16 | data[p + 3].astype(np.uint32) << 24)
        k *= _M
        k ^= k >> 24
        k *= _M
        h[rows] = (h[rows] * _M) ^ k
    rem = length % 4
    tail = start + (length & ~3)
    for r, shift in ((3, 16), (2, 8), (1, 0)):
        sel = rem >= r
        h[sel] ^= data[tail[sel] + (r - 1)].astype(np.uint32) << shift
    sel = rem > 0
    h[sel] *= _M
    h ^= h >> 13
    h *= _M
    h ^= h >> 15
    return h


def linear_hashing(h: np.ndarray, initial_count: int, undeleted_count: int) -> np.ndarray:
    """KIP-253 partitions of non-negative hashes (minibroker.partitioning.partition_for_hash)."""
    base = initial_count << ((undeleted_count // initial_count).bit_length() - 1)
    split = undeleted_count - base
    h = h.astype(np.int64)
    p = h % base
    if split:
        p = np.where(p < split, h % (base << 1), p)
    return p


def key_partitions(keys: pa.Array, initial_count: int, undeleted_count: int) -> np.ndarray:
    return linear_hashing(murmur2(keys) & np.uint32(0x7FFFFFFF), initial_count, undeleted_count)


def _varints(z: np.ndarray) -> pa.Array:
    """Unsigned varints of non-negative int64 values (< 2^35) as a binary array."""
    z = z.astype(np.int64, copy=False)
    n = len(z)
    top = int(z.max()) if n else 0
    width = 1 + sum(top >= 1 << (7 * i) for i in range(1, 5))
    nbytes = np.ones(n, np.int32)
    for i in range(1, width):
        nbytes += z >= 1 << (7 * i)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(nbytes, out=offsets[1:])
    out = np.empty(int(offsets[-1]), np.uint8)
    pos = offsets[:-1]
    for i in range(width):
        more = nbytes > i + 1
        byte = ((z >> (7 * i)) & 0x7F) | (more.astype(np.int64) << 7)
        if i == 0:
            out[pos] = byte
        else:
            sel = nbytes > i
            out[pos[sel] + i] = byte[sel]
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(out)])


def _zigzag_len(col: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(zigzag varint of each length, -1 for null, as binary; the byte lengths of the values)."""
    lengths = pc.binary_length(col).to_numpy(zero_copy_only=False)
    if col.null_count:
        valid = np.asarray(col.is_valid())
        lengths = np.where(valid, lengths, 0).astype(np.int64)
        z = np.where(valid, 2 * lengths, 1)
    else:
        lengths = lengths.astype(np.int64)
        z = 2 * lengths
    return _varints(z), lengths


def header_blobs(headers: pa.Array) -> pa.Array:
    """Each row's headers part (count, then key/value pairs) as binary; b"\\x00" for none."""
    n = len(headers)
    blobs = [b"\x00"] * n
    valid = np.flatnonzero(np.asarray(headers.is_valid()))
    for i, h in zip(valid.tolist(), headers.take(pa.array(valid)).to_pylist()):
        if h:
            parts = [_zz(len(h))]
            for item in h:
                raw, v = item["key"].encode(), item["value"]
                parts += (_zz(len(raw)), raw, _zz(-1) if v is None else _zz(len(v)), v or b"")
            blobs[i] = b"".join(parts)
    return pa.array(blobs, pa.binary())


def encode_records(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None,
                   offset_deltas: np.ndarray) -> pa.Array:
    """Each row's record bytes (timestamp delta 0), as one binary array in row order."""
    n = len(values)
    value_len, vlen = _zigzag_len(values)
    if keys is None:
        keys = pa.nulls(n, pa.binary())
    key_len, klen = _zigzag_len(keys)
    hdr = headers if headers is not None else pa.repeat(pa.scalar(b"\x00", pa.binary()), n)
    hlen = pc.binary_length(hdr).to_numpy(zero_copy_only=False).astype(np.int64)
    delta = _varints(2 * offset_deltas)
    body = (2 + pc.binary_length(delta).to_numpy(zero_copy_only=False)
            + pc.binary_length(key_len).to_numpy(zero_copy_only=False) + klen
            + pc.binary_length(value_len).to_numpy(zero_copy_only=False) + vlen + hlen)
    return pc.binary_join_element_wise(
        _varints(2 * body.astype(np.int64)), pa.scalar(b"\x00\x00", pa.binary()), delta,
        key_len, keys, value_len, values, hdr, pa.scalar(b"", pa.binary()),
        null_handling="replace", null_replacement="")


def record_slices(records: pa.Array) -> tuple[np.ndarray, pa.Buffer]:
    """(byte offsets of each record, len n+1; the data buffer) of encode_records' output."""
    _, off, data = records.buffers()
    return np.frombuffer(off, np.int32, len(records) + 1, records.offset * 4), data
