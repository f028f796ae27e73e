"""Batch body codecs for the broker's own rewrites (compaction, compression.type recompression).

Decompression is records_check's (bounded: a hostile body cannot expand without limit); compression
uses the C libraries kafka-python's codecs also use (zlib, python-snappy, lz4, zstandard) with the
topic's compression.*.level.
"""
from __future__ import annotations

import zlib

from kafka.codec import snappy_encode

from minibroker.log.records_check import GZIP, LZ4, MAX_DECOMPRESSED_BYTES, NONE, SNAPPY, ZSTD
from minibroker.log.records_check import _decompress

CODEC_IDS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}


def decompress(body: bytes | bytearray | memoryview, codec: int) -> bytes:
    """The records of a batch body; CorruptRecordError if it does not decode, ImportError when the
    codec's library is missing."""
    if codec == NONE:
        return bytes(body)
    out = _decompress(body, codec, MAX_DECOMPRESSED_BYTES)
    if out is None:
        raise ImportError(f"no library for compression codec {codec}")
    return out


def compress(records: bytes, codec: int, level: int | None = None) -> bytes:
    """`records` encoded with `codec` at `level` (None or -1: the codec's default)."""
    if codec == NONE:
        return records
    if codec == GZIP:
        c = zlib.compressobj(level if level and level > 0 else 6, zlib.DEFLATED, 31)
        return c.compress(records) + c.flush()
    if codec == SNAPPY:
        snappy: bytes = snappy_encode(records)
        return snappy
    if codec == LZ4:
        import lz4.frame
        lz4_frame: bytes = lz4.frame.compress(records, compression_level=level or 9,
                                              block_linked=False, content_checksum=False)
        return lz4_frame
    if codec == ZSTD:
        import zstandard
        return zstandard.ZstdCompressor(level=3 if level is None else level).compress(records)
    raise ValueError(f"unknown compression codec {codec}")
