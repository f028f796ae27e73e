"""Batches whose CRC is right but whose contents lie (issue 25, item 4): refused whole as Kafka's
LogValidator refuses them, with CORRUPT_MESSAGE or INVALID_RECORD, and nothing is stored or
replicated. Real compressed batches of every codec are still accepted.

Raw produce requests against a real 3-broker cluster over loopback (the setup of test_bad_input).
"""
from __future__ import annotations

import struct

import pytest
import zstandard
from kafka.codec import gzip_encode
from kafka.errors import CorruptRecordError, InvalidRecordError
from kafka.record.default_records import DefaultRecordBatchBuilder

from cluster_helpers import batch, connect, list_offsets_request, produce_request
from minibroker.log.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER, HEADER_SIZE, crc32c
from minibroker.log.records_check import MAX_DECOMPRESSED_BYTES, check_records
from test_bad_input import TOPIC, closing_lines, setup  # noqa: F401  (setup is a fixture)


def forged(body: bytes, *, count: int, last_offset_delta: int | None = None,
           compression: int = 0, timestamp: int = 0) -> bytes:
    """A v2 batch around `body` with the given header claims and a correct CRC."""
    out = bytearray(HEADER_SIZE) + body
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, compression, lod, timestamp, timestamp,
                     -1, -1, -1, count)
    struct.pack_into(">I", out, CRC_OFFSET, crc32c(out[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def records_body(values: list[bytes]) -> bytes:
    return bytes(batch(values, 0))[HEADER_SIZE:]


def rewrite_delta(body: bytes, new_delta: int) -> bytes:
    """The second record of a two-record body with its offset delta replaced (one-byte varints)."""
    first_len = body[0] >> 1
    second = 1 + first_len
    # second record: length, attributes, timestamp delta, offset delta
    b = bytearray(body)
    b[second + 3] = new_delta << 1
    return bytes(b)


def compressed(codec: int, values: list[bytes]) -> bytes:
    """A batch as kafka-python's producer encodes it with `codec`."""
    b = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for i, v in enumerate(values):
        b.append(i, 1000, None, v, [])
    return bytes(b.build())


BOMB = zstandard.ZstdCompressor().compress(b"\x00" * (MAX_DECOMPRESSED_BYTES + 1))

REFUSED = {
    "unknown_codec_7": (lambda: forged(records_body([b"x"]), count=1, compression=7),
                        CorruptRecordError, "Unknown compression type id: 7"),
    "undecodable_gzip": (lambda: forged(records_body([b"x"]), count=1, compression=1),
                         CorruptRecordError, "decompressing"),
    "undecodable_zstd": (lambda: forged(b"\x28\xb5\x2f\xfd" + b"\xff" * 40, count=1, compression=4),
                         CorruptRecordError, "decompressing"),
    "undecodable_lz4": (lambda: forged(b"\x04\x22\x4d\x18" + b"\xff" * 40, count=1, compression=3),
                        CorruptRecordError, "decompressing"),
    "undecodable_snappy": (lambda: forged(b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x00\x05"
                                          + b"\xff" * 5, count=1, compression=2),
                           CorruptRecordError, ""),
    "zstd_bomb": (lambda: forged(BOMB, count=1, compression=4), CorruptRecordError,
                  f"exceed {MAX_DECOMPRESSED_BYTES} bytes"),
    "count_2_31_with_one_record": (lambda: forged(records_body([b"x"]), count=2**31 - 1),
                                   InvalidRecordError, "cannot fit"),
    "count_2_with_one_record": (lambda: forged(records_body([b"x" * 30]), count=2),
                                InvalidRecordError, ""),
    "one_record_counted_with_two_present": (lambda: forged(records_body([b"x", b"y"]), count=1),
                                            InvalidRecordError, "2 records present, 1 declared"),
    "garbage_records": (lambda: forged(b"\x7f" * 40, count=1), InvalidRecordError, ""),
    # Inner fields of compressed batches are read (they are decompressed anyway); of uncompressed
    # ones only the record lengths (the produce hot path), as records_check explains.
    "repeated_offset_delta_in_gzip": (lambda: forged(gzip_encode(rewrite_delta(
        records_body([b"x", b"y"]), 0)), count=2, compression=1),
        InvalidRecordError, "offset delta 0, expected 1"),
    "record_fields_overrun_in_gzip": (lambda: forged(gzip_encode(b"\x0e\x00\x00\x00\x7e\x00\x00\x00"),
                                                     count=1, compression=1), InvalidRecordError, ""),
    "garbage_inside_zstd": (lambda: forged(zstandard.ZstdCompressor().compress(b"\x11" * 50),
                                           count=1, compression=4), InvalidRecordError, ""),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
async def test_lying_batch_is_refused_and_not_stored(setup, caplog, case):
    make, error, words = REFUSED[case]
    records = make()
    with pytest.raises(error) as e:
        body = memoryview(records)[HEADER_SIZE:]
        fields = HEADER.unpack_from(records, 0)
        check_records(body, fields[12], fields[5] & 7)
    assert words in str(e.value)
    conn = await connect(setup.c, setup.leader, "bad")
    for acks in (1, -1):
        resp = await conn.request(produce_request(TOPIC, 0, records, acks=acks), 9)
        [p] = resp.responses[0].partition_responses
        assert (p.error_code, p.base_offset) == (error.errno, -1), p
        assert p.error_message == str(e.value)
    conn.close()
    assert closing_lines(caplog) == []
    await setup.assert_broker_unharmed()     # same log bytes, LEO and HWM on every replica


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
async def test_real_batches_of_every_codec_are_accepted(setup, codec):
    values = [b"value-%d" % i * (i % 5 + 1) for i in range(50)]
    records = compressed(codec, values)
    conn = await connect(setup.c, setup.leader, "good")
    resp = await conn.request(produce_request(TOPIC, 0, records), 9)
    [p] = resp.responses[0].partition_responses
    assert (p.error_code, p.base_offset) == (0, 1)
    conn.close()


def test_decompression_stops_at_the_bound():
    body = zstandard.ZstdCompressor().compress(b"\x00" * 10_000)
    with pytest.raises(CorruptRecordError, match="exceed 9999 bytes"):
        check_records(body, 1, 4, max_decompressed=9_999)


@pytest.mark.parametrize("codec", [0, 1])
def test_record_walk_is_exact_for_real_batches(codec):
    for n in (1, 2, 127, 128, 300):
        data = bytes(batch([b"v" * (i * 37 % 9000) for i in range(n)], 0, key=b"k"))
        body = data[HEADER_SIZE:]
        check_records(gzip_encode(body) if codec else body, n, codec)
        for wrong in (n - 1, n + 1):
            with pytest.raises(InvalidRecordError):
                check_records(gzip_encode(body) if codec else body, wrong, codec)
    with_headers = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, 1 << 20)
    for i in range(20):
        with_headers.append(i, 5, b"k" * i, None, [("h%d" % j, b"x" * j) for j in range(i % 4)]
                            + [("null", None)])
    data = bytes(with_headers.build())
    check_records(memoryview(data)[HEADER_SIZE:], 20, codec)


async def test_list_offsets_by_time_answers_over_a_record_with_bad_fields(setup, caplog):
    """An uncompressed record whose framing is right but whose key length runs past it is stored
    (only lengths are walked on the hot path); ListOffsets by timestamp still answers, with the
    batch's base offset, instead of closing the connection."""
    now = setup.c.clock.now_ms()
    records = forged(b"\x0e\x00\x00\x00\x7e\x00\x00\x00", count=1, timestamp=now + 5)
    conn = await connect(setup.c, setup.leader, "odd")
    resp = await conn.request(produce_request(TOPIC, 0, records), 9)
    [p] = resp.responses[0].partition_responses
    assert (p.error_code, p.base_offset) == (0, 1)
    resp = await conn.request(list_offsets_request(TOPIC, 0, now + 1), 7)
    [lp] = resp.topics[0].partitions
    assert (lp.error_code, lp.offset, lp.timestamp) == (0, 1, now + 5)
    conn.close()
    assert closing_lines(caplog) == []
