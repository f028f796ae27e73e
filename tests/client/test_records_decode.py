"""The reference client's own reader of uncompressed v2 batches gives what kafka-python's gives."""
from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka.protocol.consumer import FetchResponse

from minibroker.client.records import (_decode_generic, decode_records, drop_aborted, encode_batch,
                                       mark_transactional)
from minibroker.log.batch import build_control_batch

FetchAborted = FetchResponse.FetchableTopicResponse.PartitionData.AbortedTransaction

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
       epoch=st.integers(-1, 30000), seq=st.integers(-1, 2**30), txn=st.booleans())
def test_plain_batches_are_kafka_pythons_bytes(recs, pid, epoch, seq, txn):
    from kafka.record.default_records import DefaultRecordBatchBuilder
    builder = DefaultRecordBatchBuilder(2, 0, txn, pid, epoch, seq, 1 << 30)
    for i, (key, value, headers, ts) in enumerate(recs):
        builder.append(i, ts, key, value, list(headers))
    assert encode_batch(recs, 0, pid, epoch, seq, txn) == bytes(builder.build())
    if txn:                             # send_batch's pre-built batches, marked when sealed
        assert mark_transactional(encode_batch(recs, 0, pid, epoch, seq)) == bytes(builder.build())


def test_drop_aborted_follows_kafkas_fetcher():
    """Two producers interleaved: pid 7's first transaction is aborted, pid 8's committed, then
    pid 7's next transaction (after its ABORT marker) is kept."""
    def txn_batch(base, pid, value):
        b = bytearray(encode_batch([(None, value, [], 0)], 0, pid, 0, base, True))
        struct.pack_into(">q", b, 0, base)
        return bytes(b)
    data = (txn_batch(0, 7, b"a0") + txn_batch(1, 8, b"c0") + txn_batch(2, 7, b"a1") +
            bytes(build_control_batch(False, 7, 0, base_offset=3)) +
            bytes(build_control_batch(True, 8, 0, base_offset=4)) + txn_batch(5, 7, b"c1"))
    recs, next_offset = decode_records("t", 0, data, 0)
    assert next_offset == 6 and [r.value for r in recs] == [b"a0", b"c0", b"a1", b"c1"]
    aborted = [FetchAborted(producer_id=7, first_offset=0)]
    assert [r.value for r in drop_aborted(recs, data, aborted)] == [b"c0", b"c1"]
    assert drop_aborted(recs, data, []) == recs
