"""Hypothesis over the frame decoder and every handler (issue 25): whatever the bytes, a request is
answered or refused with ProtocolViolation (one closed connection); no handler raises anything
else, and the broker still answers afterwards. Bounded (a few hundred examples) for CI; the long
mutation run is benchmarks/fuzz_long.py.

One real in-process cluster (1 broker, its controller, topic "fuzz") on a loop of its own; frames
go straight to the broker's `handle(conn, frame)`, the server end of an in-memory connection.
"""
from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import mutate, seeds
from harness import Harness
from minibroker.broker.dispatch import HANDLERS, supported_versions
from minibroker.protocol.framing import FrameReader, ProtocolViolation

SEEDS = seeds()
KEYS = [(k, v) for k, lo, hi in supported_versions() for v in range(lo, hi + 1)]
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def harness():
    h = Harness()
    yield h
    h.close()


def _header(key: int, version: int, corr: int) -> bytes:
    flexible = version >= HANDLERS[key].flexible_from
    return struct.pack(">hhih", key, version, corr, 4) + b"fuzz" + (b"\x00" if flexible else b"")


@SETTINGS
@given(st.sampled_from(KEYS), st.binary(max_size=120), st.integers(0, 2**31 - 1))
def test_random_bodies_of_every_api_and_version(harness, key_version, body, corr):
    key, version = key_version
    harness.send(_header(key, version, corr) + body)
    assert harness.failures == []


@SETTINGS
@given(st.integers(0, len(SEEDS) - 1), st.integers(0, 2**32))
def test_mutated_client_requests(harness, which, seed):
    _, _, frame = SEEDS[which]
    harness.send(mutate(frame, random.Random(seed)))
    assert harness.failures == []


def test_the_broker_still_answers_after_the_fuzzing(harness):
    from kafka.protocol.metadata import ApiVersionsRequest
    resp = harness.run(harness.client.request(ApiVersionsRequest(), 3))
    assert resp.error_code == 0


@SETTINGS
@given(st.lists(st.binary(max_size=64), max_size=12), st.integers(16, 4096))
def test_frame_reader_splits_or_refuses_any_stream(chunks, max_frame):
    """Any byte stream, cut anywhere: complete frames come out in order, each exactly its
    declared size, or the stream is refused with ProtocolViolation; nothing else."""
    reader = FrameReader(max_frame)
    stream = b"".join(chunks)
    frames = []
    try:
        for chunk in chunks:
            frames += [bytes(f) for f in reader.feed(chunk)]
    except ProtocolViolation:
        return
    pos = 0
    for f in frames:
        (size,) = struct.unpack_from(">i", stream, pos)
        assert 0 <= size <= max_frame and stream[pos + 4:pos + 4 + size] == f
        pos += 4 + size
    assert len(stream) - pos < 4 or struct.unpack_from(">i", stream, pos)[0] > len(stream) - pos - 4
