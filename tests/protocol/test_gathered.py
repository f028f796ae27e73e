"""Gathered frames (minibroker.protocol.gathered): a memory pipe hands a Fetch response's stored
batches over by reference. The frame it makes holds the same bytes as the copy it replaces, its
record sets decode to the very views the leader sent, and whatever cannot be passed safely (a
writable buffer, several frames, too few bytes of views) is left to be copied."""
from __future__ import annotations

import struct

import pytest

from minibroker.network.client import response_body
from minibroker.protocol.fast import FetchPartition, decode_fetch_response, encode_fetch_response
from minibroker.protocol.framing import FrameReader, ProtocolViolation
from minibroker.protocol.gathered import GATHER_MIN_BYTES, Gathered, gather


def stored(n: int, fill: int) -> memoryview:
    return memoryview(bytearray([fill]) * n).toreadonly()     # as a StoredBatch.view


def response(*record_sets, version: int = 12) -> list:
    parts = [FetchPartition(i, 0, 10, 10, 0, rs) for i, rs in enumerate(record_sets)]
    return encode_fetch_response(version, 7, 0, 0, 99, [("t", parts)])


def test_a_fetch_response_is_passed_with_its_batches_by_reference():
    a, b, c = stored(GATHER_MIN_BYTES, 1), stored(300, 2), stored(5000, 3)
    parts = response([a, b], [], None, [c])
    g = gather(parts)
    assert g is not None and g.joined() == bytearray().join(parts)     # the bytes a copy holds
    assert sum(len(p) for p in parts if type(p) is bytes) == len(g.frame) + 4
    body = response_body(True, g, 12)
    resp = decode_fetch_response(body, 12)
    got = [pd.records for pd in resp.responses[0].partitions]
    assert [[id(v) for v in rs] if type(rs) is list else rs if rs is None else bytes(rs)
            for rs in got] == [[id(a), id(b)], b"", None, [id(c)]]     # an empty set stays inline
    whole = decode_fetch_response(memoryview(g.joined())[4:][5:], 12)  # correlation id, tags
    assert [bytes(pd.records) if pd.records is not None else None
            for pd in whole.responses[0].partitions] == \
        [bytes(a) + bytes(b), b"", None, bytes(c)]
    assert whole._replace(responses=None) == resp._replace(responses=None)


@pytest.mark.parametrize("record_set", [
    pytest.param([b"s" * 100, stored(GATHER_MIN_BYTES, 1)], id="small batch first"),
    pytest.param([stored(GATHER_MIN_BYTES, 1), b"s" * 100, stored(300, 2)], id="small between"),
    pytest.param([stored(GATHER_MIN_BYTES, 1), b"s" * 100, b"t" * 50], id="small batches last"),
])
def test_a_record_set_mixing_small_batches_and_views_decodes_whole(record_set):
    """A leader keeps a small batch as bytes (copied with the encoded bytes) and a larger one as
    a view (handed over): one record set may hold both, in any order. Its views come out as the
    objects sent, the bytes between them as the frame's, and nothing after it moves."""
    parts = response([stored(400, 9)], record_set, [b"x" * 70])
    g = gather(parts)
    assert g is not None
    resp = decode_fetch_response(response_body(True, g, 12), 12)
    got = [pd.records for pd in resp.responses[0].partitions]
    assert type(got[1]) is list
    assert [_joined(rs) for rs in got] == \
        [b"\x09" * 400, b"".join(bytes(r) for r in record_set), b"x" * 70]
    sent_views = {id(r) for r in record_set if type(r) is memoryview}
    assert sent_views <= {id(v) for v in got[1]}


def _joined(records) -> bytes:
    return b"".join(bytes(v) for v in records) if type(records) is list else bytes(records)


@pytest.mark.parametrize("parts", [
    pytest.param(response([stored(GATHER_MIN_BYTES - 1, 1)]), id="too few bytes of views"),
    pytest.param(response([memoryview(bytearray(GATHER_MIN_BYTES))]), id="a writable view"),
    pytest.param(response([stored(GATHER_MIN_BYTES, 1)]) + [b"\x00\x00\x00\x00"], id="two frames"),
    pytest.param([bytearray(b"\x00\x00\x00\x01\x00")], id="a bytearray"),
    pytest.param([], id="nothing"),
])
def test_what_cannot_be_passed_safely_is_copied(parts):
    assert gather(parts) is None


def test_a_record_set_handed_over_with_another_size_is_a_protocol_violation():
    g = gather(response([stored(GATHER_MIN_BYTES, 1)]))
    (at, views), = g.holes.items()
    bad = g._replace(holes={at: views + [stored(1, 0)]})
    with pytest.raises(ProtocolViolation, match="different size"):
        decode_fetch_response(response_body(True, bad, 12), 12)


def test_the_frame_reader_takes_a_gathered_frame_whole_checks_its_size_and_keeps_the_stream():
    g = gather(response([stored(GATHER_MIN_BYTES, 1)]))
    assert FrameReader(1 << 20).take(g) == [g]
    with pytest.raises(ProtocolViolation):
        FrameReader(GATHER_MIN_BYTES).take(g)
    # Behind a partial frame it joins the stream as its bytes would (here: ending that frame).
    r = FrameReader(1 << 20)
    joined = bytes(g.joined())
    assert r.take(bytearray(struct.pack(">i", 2 + len(joined)) + b"ab")) == []
    (frame,) = r.take(g)
    assert type(frame) is not Gathered and bytes(frame) == b"ab" + joined
