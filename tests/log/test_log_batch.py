from __future__ import annotations

import struct

import pytest
from kafka.errors import CorruptRecordError, InvalidRecordError
from log_helpers import client_batch, decode

from minibroker.log.batch import (
    HEADER_SIZE, INT32_MAX, BatchHeader, build_batch, build_control_batch, increment_sequence, parse_batches,
    patch_batch, record_timestamps, set_log_append_time, validate_client_batch,
)


def test_parse_client_batch_header_fields():
    raw = client_batch([b"a", b"b", b"c"], ts=5000, producer_id=7, producer_epoch=2, base_sequence=10)
    (h,) = parse_batches(memoryview(raw))
    assert h == BatchHeader(base_offset=0, batch_length=len(raw) - 12, partition_leader_epoch=0, magic=2,
                            crc=h.crc, attributes=0, last_offset_delta=2, base_timestamp=5000, max_timestamp=5000,
                            producer_id=7, producer_epoch=2, base_sequence=10, records_count=3,
                            offset_in_buf=0, size=len(raw))
    assert (h.last_offset, h.last_sequence, h.compression, h.is_control, h.has_producer_id) == (2, 12, 0, False, True)


def test_parse_several_batches_positions():
    a, b = client_batch([b"x"]), client_batch([b"y", b"z"], compression=0)
    hs = parse_batches(a + b)
    assert [(h.offset_in_buf, h.size) for h in hs] == [(0, len(a)), (len(a), len(b))]
    assert parse_batches(b"") == []


def test_parse_gzip_batch():
    raw = client_batch([b"v" * 200] * 5, compression=1)
    (h,) = parse_batches(raw)
    assert h.compression == 1 and h.records_count == 5 and h.size < 5 * 200


def _corrupt(raw: bytes, pos: int, fmt: str, value) -> bytes:
    out = bytearray(raw)
    struct.pack_into(fmt, out, pos, value)
    return bytes(out)


@pytest.mark.parametrize("mutate, error, text", [
    (lambda r: r[:-1], CorruptRecordError, "extends past the end"),
    (lambda r: r + r[:30], CorruptRecordError, "extends past the end"),
    (lambda r: r + r[:5], CorruptRecordError, "too short"),
    (lambda r: _corrupt(r, 8, ">i", -1), CorruptRecordError, "less than the minimum"),
    (lambda r: _corrupt(r, 8, ">i", 10), CorruptRecordError, "less than the minimum"),
    (lambda r: _corrupt(r, 8, ">i", 10_000), CorruptRecordError, "extends past the end"),
    (lambda r: _corrupt(r, 17, ">B", r[17] ^ 0xFF), CorruptRecordError, "corrupt"),
    (lambda r: _corrupt(r, len(r) - 1, ">B", r[-1] ^ 1), CorruptRecordError, "corrupt"),
    (lambda r: _corrupt(r, 16, ">b", 1), InvalidRecordError, "magic version 2"),
    (lambda r: _corrupt(r, 16, ">b", 0), InvalidRecordError, "magic version 2"),
    (lambda r: _corrupt(r, 16, ">b", 3), CorruptRecordError, "unknown magic"),
])
def test_parse_rejects_corruption(mutate, error, text):
    raw = client_batch([b"a", b"b"])
    with pytest.raises(error, match=text):
        parse_batches(mutate(raw))


def test_negative_counts_are_corrupt_even_with_valid_crc():
    neg_delta = build_batch([(None, b"v", [])])
    struct.pack_into(">i", neg_delta, 23, -1)
    with pytest.raises(CorruptRecordError, match="corrupt"):
        parse_batches(neg_delta)
    with pytest.raises(CorruptRecordError, match="negative lastOffsetDelta"):
        parse_batches(neg_delta, verify_crc=False)
    neg_count = build_batch([(None, b"v", [])])
    struct.pack_into(">i", neg_count, 57, -3)
    with pytest.raises(CorruptRecordError, match="negative record count"):
        parse_batches(neg_count, verify_crc=False)


def test_partial_tail_allowed_only_when_asked():
    a = client_batch([b"x"])
    assert [h.size for h in parse_batches(a + a[:20], allow_partial_tail=True)] == [len(a)]
    assert [h.size for h in parse_batches(a + a[:5], allow_partial_tail=True)] == [len(a)]


def test_validate_client_batch():
    validate_client_batch(parse_batches(client_batch([b"a"]))[0])
    with pytest.raises(InvalidRecordError, match="control records"):
        validate_client_batch(parse_batches(build_control_batch(True, 1, 0))[0])
    odd = build_batch([(None, b"v", []), (None, b"w", [])])
    struct.pack_into(">i", odd, 57, 1)
    with pytest.raises(InvalidRecordError, match="Inconsistent"):
        validate_client_batch(parse_batches(odd, verify_crc=False)[0])
    struct.pack_into(">i", odd, 57, 0)
    with pytest.raises(InvalidRecordError, match="Invalid reported count"):
        validate_client_batch(parse_batches(odd, verify_crc=False)[0])


def test_patch_keeps_crc_valid():
    raw = bytearray(client_batch([b"a", b"b"]))
    patch_batch(raw, 0, 1234, 9)
    (h,) = parse_batches(raw)
    assert (h.base_offset, h.partition_leader_epoch) == (1234, 9)
    assert [o for o, *_ in decode(raw)] == [1234, 1235]


def test_patch_at_position_in_larger_buffer():
    a, b = client_batch([b"a"]), client_batch([b"b"])
    buf = bytearray(a + b)
    patch_batch(memoryview(buf), len(a), 77, 4)
    assert [(h.base_offset, h.partition_leader_epoch) for h in parse_batches(buf)] == [(0, 0), (77, 4)]


def test_set_log_append_time_recomputes_crc():
    raw = bytearray(client_batch([b"a", b"b"], ts=5))
    set_log_append_time(raw, 0, 99_000)
    (h,) = parse_batches(raw)
    assert (h.timestamp_type, h.max_timestamp, h.base_timestamp) == (1, 99_000, 5)
    assert [ts for _, ts, *_ in decode(raw)] == [99_000, 99_000]


def test_build_batch_round_trips_through_kafka_python():
    for compression in (0, 1):
        raw = build_batch([(b"k", b"v" * 50, [("h", b"1"), ("n", None)], 10), (None, None, [], 30)],
                          base_offset=5, compression=compression, producer_id=3, producer_epoch=1,
                          base_sequence=8, leader_epoch=2)
        (h,) = parse_batches(raw)
        assert (h.base_offset, h.partition_leader_epoch, h.base_timestamp, h.max_timestamp, h.producer_id,
                h.last_sequence, h.compression) == (5, 2, 10, 30, 3, 9, compression)
        assert decode(raw) == [(5, 10, b"k", b"v" * 50), (6, 30, None, None)]
        assert list(record_timestamps(raw)) == [(5, 10), (6, 30)]


def test_control_batch():
    (h,) = parse_batches(build_control_batch(False, 42, 3, coordinator_epoch=7))
    assert (h.is_control, h.is_transactional, h.producer_id, h.producer_epoch) == (True, True, 42, 3)


def test_sequence_wraps():
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert HEADER_SIZE == 61
