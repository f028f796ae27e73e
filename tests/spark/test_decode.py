"""The source's vectorised decoder (minibroker.spark.decode) against kafka-python's record reader,
without Spark: the same columns and next fetch offset for uncompressed and gzip / snappy / lz4 /
zstd batches, null and empty keys and values, headers, wide varints (values over 8 KiB, timestamp
deltas beyond 2^35, negative deltas), LogAppendTime, a transaction's records with its ABORT and
COMMIT markers (control batches are skipped; at read_uncommitted aborted records are delivered, as
by Spark's connector), fetch ranges starting and ending inside batches, and a partial batch at the
end of an answer. Pre-v2 message sets go to kafka-python's reader; corrupt counts are refused."""
from __future__ import annotations

import random
import struct

import pytest

pa = pytest.importorskip("pyarrow", reason="the spark extra is not installed: pip install -e '.[test,fast,spark]'")

import crc32c
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from minibroker.client.records import encode_batch
from minibroker.spark import decode
from minibroker.spark.arrow import to_record_batch

TS0 = 1_700_000_000_000


def _set(batch: bytes, base: int, attrs: int = 0, max_ts: int | None = None) -> bytes:
    """`batch` at base offset `base`, with attribute bits added (and the CRC they change)."""
    b = bytearray(batch)
    struct.pack_into(">q", b, 0, base)
    struct.pack_into(">h", b, 21, struct.unpack_from(">h", b, 21)[0] | attrs)
    if max_ts is not None:
        struct.pack_into(">q", b, 35, max_ts)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def _records(rng: random.Random, n: int, headers: bool) -> list[tuple]:
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else b"" if i % 11 == 0 else b"k%d" % rng.randrange(1000)
        value = None if i % 13 == 0 else b"" if i % 17 == 0 else rng.randbytes(rng.randrange(200))
        hs = [("h", b"x"), ("n", None)] if headers and i % 3 == 0 else []
        out.append((key, value, hs, TS0 + rng.randrange(-5, 5000)))
    return out


def _answer() -> bytes:
    """One Fetch answer's bytes: a batch of every kind, offsets 0 .. 4199, then a partial batch."""
    rng = random.Random(45)
    batches, base = [], 0

    def add(batch: bytes, count: int, attrs: int = 0, max_ts: int | None = None) -> None:
        nonlocal base
        batches.append(_set(batch, base, attrs, max_ts))
        base += count

    for codec in (0, 1, 2, 3, 4):
        add(encode_batch(_records(rng, 300, headers=True), compression=codec), 300)
    big = [(b"big", rng.randbytes(20000), [], TS0), (None, rng.randbytes(9000), [], TS0 + (1 << 40)),
           (b"neg", b"v", [], TS0 - (1 << 36))]
    add(encode_batch(big), 3)
    add(encode_batch(_records(rng, 100, headers=False)), 100, attrs=0x08, max_ts=TS0 + 99)
    txn = encode_batch(_records(rng, 50, headers=False), producer_id=7, producer_epoch=0,
                       base_sequence=0, transactional=True)
    add(txn, 50)
    abort = encode_batch([(struct.pack(">hh", 0, 0), struct.pack(">hi", 0, 1), [], TS0)],
                         producer_id=7, producer_epoch=0, transactional=True)
    add(abort, 1, attrs=0x20)
    add(txn, 50)
    commit = encode_batch([(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 1), [], TS0)],
                          producer_id=7, producer_epoch=0, transactional=True)
    add(commit, 1, attrs=0x20)
    add(encode_batch(_records(rng, 1000, headers=False), compression=4), 1000)
    add(encode_batch(_records(rng, 1495, headers=True)), 1495)
    partial = _set(encode_batch(_records(rng, 10, headers=False)), base)
    return b"".join(batches) + partial[:len(partial) // 2]


ANSWER = _answer()


def _batch(decoded, with_headers: bool) -> pa.RecordBatch:
    return to_record_batch([decoded], "t", 0, with_headers)


MARKERS = (1653, 1704)             # the ABORT and COMMIT control batches


@pytest.mark.parametrize("fetch_offset,end", [(0, 1 << 62), (0, 4200), (150, 1640), (1600, 1710),
                                              (1704, 1706), (1856, 4000), (4199, 5000)])
@pytest.mark.parametrize("with_headers", [False, True])
def test_vectorised_decoding_matches_kafka_pythons_reader(fetch_offset, end, with_headers):
    got, nxt = decode.decode(ANSWER, fetch_offset, end, with_headers)
    want, want_nxt = decode.legacy(ANSWER, fetch_offset, end, with_headers)
    assert nxt == want_nxt == 4200                      # the partial batch is fetched again
    assert got is not None and want is not None
    assert got.offset.tolist() == [o for o in range(fetch_offset, min(end, 4200))
                                   if o not in MARKERS]
    assert _batch(got, with_headers).equals(_batch(want, with_headers))


def test_markers_are_skipped_and_aborted_records_delivered_at_read_uncommitted():
    got, _ = decode.decode(ANSWER, 1600, 1710, False)
    assert got.offset.tolist() == [o for o in range(1600, 1710) if o not in MARKERS]
    want, _ = decode.legacy(ANSWER, 1600, 1710, False)
    assert got.value.equals(want.value)            # both copies of the transaction's records


def test_nulls_empties_headers_and_wide_fields_round_trip():
    got, _ = decode.decode(ANSWER, 0, 1 << 62, True)
    rb = _batch(got, True)
    keys, values = rb.column(0).to_pylist(), rb.column(1).to_pylist()
    assert keys[0] is None and keys[11] == b"" and values[13] is None and values[17] == b""
    assert rb.column(7).to_pylist()[3] == [{"key": "h", "value": b"x"}, {"key": "n", "value": None}]
    assert rb.column(7).to_pylist()[1] == []
    assert len(values[1500]) == 20000 and len(values[1501]) == 9000
    stamps = got.timestamp.tolist()
    assert stamps[1500:1503] == [TS0, TS0 + (1 << 40), TS0 - (1 << 36)]
    assert set(stamps[1503:1603]) == {TS0 + 99} and set(got.ttype[1503:1603].tolist()) == {1}


def test_nothing_in_range_still_advances():
    assert decode.decode(ANSWER, 1653, 1654, False) == (None, 4200)    # only the ABORT marker
    assert decode.decode(ANSWER[:100], 0, 10, False) == (None, 0)      # no whole batch


def test_pre_v2_message_sets_go_to_kafka_pythons_reader():
    builder = LegacyRecordBatchBuilder(1, 0, 1 << 20)
    for i in range(5):
        builder.append(i, TS0 + i, b"k%d" % i, b"v%d" % i)
    data = bytes(builder.build())
    with pytest.raises(decode.Legacy):
        decode.decode(data, 0, 100, False)
    got, nxt = decode.decode_answer(data, 2, 100, False)
    assert nxt == 5 and got.offset.tolist() == [2, 3, 4]
    assert got.value.to_pylist() == [b"v2", b"v3", b"v4"]


def test_a_batch_whose_count_disagrees_with_its_records_is_refused():
    batch = bytearray(encode_batch([(None, b"v", [], TS0)] * 3))
    struct.pack_into(">i", batch, 57, 4)
    with pytest.raises(decode.CorruptRecordError, match="holds 3 records, its header says 4"):
        decode.decode(bytes(batch), 0, 10, False)
