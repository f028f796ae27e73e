"""The reference client's own reader of uncompressed v2 batches gives what kafka-python's gives."""
from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from minibroker.client.records import _decode_generic, decode_records, encode_batch

maybe_bytes = st.one_of(st.none(), st.binary(max_size=300))
record = st.tuples(maybe_bytes, maybe_bytes,
                   st.lists(st.tuples(st.text(max_size=20), maybe_bytes), max_size=3),
                   st.integers(0, 2**41))
batches = st.lists(st.lists(record, min_size=1, max_size=30), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(batches=batches, codec=st.sampled_from([0, 1]), cut=st.integers(0, 200),
       skip=st.integers(0, 60))
def test_decode_matches_kafka_python(batches, codec, cut, skip):
    data, base = b"", 0
    for recs in batches:
        b = bytearray(encode_batch(recs, codec))
        struct.pack_into(">q", b, 0, base)
        data += bytes(b)
        base += len(recs)
    data = data[:max(0, len(data) - cut)]          # a fetch may end inside a batch
    fetch_offset = min(skip, base)
    got = decode_records("t", 0, data, fetch_offset)
    assert got == _decode_generic("t", 0, data, fetch_offset, [], fetch_offset)
    assert [r.offset for r in got[0]] == sorted(r.offset for r in got[0])


@settings(max_examples=150, deadline=None)
@given(recs=st.lists(record, min_size=1, max_size=30), pid=st.integers(-1, 2**40),
       epoch=st.integers(-1, 30000), seq=st.integers(-1, 2**30))
def test_plain_batches_are_kafka_pythons_bytes(recs, pid, epoch, seq):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(2, 0, False, pid, epoch, seq, 1 << 30)
    for i, (key, value, headers, ts) in enumerate(recs):
        builder.append(i, ts, key, value, list(headers))
    assert encode_batch(recs, 0, pid, epoch, seq) == bytes(builder.build())
