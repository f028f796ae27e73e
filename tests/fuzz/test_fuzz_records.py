"""Hypothesis over the produce path's record checks (minibroker.log.records_check): the inline
length walk accepts exactly what a plain varint walk accepts, on real record bodies with bytes
flipped and on random bytes; and no body makes either check raise anything but Kafka's errors."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.errors import CorruptRecordError, InvalidRecordError

from minibroker.log.batch import HEADER_SIZE, build_batch
from minibroker.log.records_check import check_records


def reference(buf: bytes, count: int) -> bool:
    """Zigzag varint lengths, each >= 6, tiling `buf` exactly, `count` of them."""
    pos = n = 0
    while pos < len(buf):
        value = shift = 0
        while True:
            if pos >= len(buf) or shift > 28:
                return False
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                break
        length = (value >> 1) ^ -(value & 1)
        if length < 6:
            return False
        pos += length
        n += 1
    return pos == len(buf) and n == count and count * 7 <= len(buf)


def accepted(body: bytes, count: int) -> bool:
    """The walk's verdict, the same for read-only bytes and for a writable view (a large frame's
    buffer, walked in place)."""
    verdicts = set()
    for form in (body, memoryview(bytearray(b"..." + body))[3:]):
        try:
            check_records(form, count, 0)
            verdicts.add(True)
        except InvalidRecordError:
            verdicts.add(False)
    assert len(verdicts) == 1
    return verdicts.pop()


bodies = st.builds(
    lambda sizes, flips: (sizes, flips), st.lists(st.integers(0, 9000), min_size=1, max_size=8),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(bodies, st.integers(-1, 2))
def test_length_walk_matches_a_plain_varint_walk(case, count_shift):
    agrees(case, count_shift)


def agrees(case, count_shift):
    sizes, flips = case
    body = bytearray(bytes(build_batch([(None, b"v" * n, []) for n in sizes]))[HEADER_SIZE:])
    for pos, value in flips:
        body[pos % len(body)] = value
    count = len(sizes) + count_shift
    assert accepted(bytes(body), count) == reference(bytes(body), count)


# Runs of equal-sized records (a producer's usual batch), across the 1- to 2-byte offset delta at
# 64 (100 and 164 share a first length byte): the walk counts such runs with strided slices,
# which must agree with the plain walk too.
runs = st.builds(
    lambda parts, flips: ([n for n, times in parts for _ in range(times)], flips),
    st.lists(st.tuples(st.sampled_from([0, 1, 57, 58, 100, 164, 8180]), st.integers(1, 90)),
             min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=2))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(runs, st.integers(-1, 1))
def test_length_walk_over_runs_of_equal_records(case, count_shift):
    agrees(case, count_shift)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.binary(max_size=200), st.integers(0, 40), st.integers(0, 7))
def test_random_bodies_raise_only_kafka_errors(body, count, codec):
    try:
        check_records(body, count, codec)
    except (InvalidRecordError, CorruptRecordError):
        pass


def test_reference_agrees_on_a_real_batch():
    body = bytes(build_batch([(None, b"x" * 70, [])] * 3))[HEADER_SIZE:]
    assert reference(body, 3) and accepted(body, 3)
    with pytest.raises(InvalidRecordError):
        check_records(body, 4, 0)
