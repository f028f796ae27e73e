"""The follower's hand-rolled FetchResponse decoder (minibroker.protocol.fast.decode_fetch_response).

Responses encoded by kafka-python's FetchResponse and by our own encode_fetch_response decode to the
same fields, with records as zero-copy views of the body, for every version the decoder takes
(v4-12); truncated, extended, malformed or corrupted bodies raise ProtocolViolation and nothing
else. KafkaClientConnection's raw responses are views of its receive buffer, and the replica fetcher
keeps no view of a response once it has handled it (the FrameReader reuses buffers only then).

`python3 tests/protocol/test_fast_fetch_decode.py` prints a micro-benchmark (generic vs hand-rolled decode).
"""
from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse

from cluster_helpers import batch, connect, fetch_request, produce_request, wait_until
from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection, decode_response, response_class_for
from minibroker.protocol.fast import FetchPartition, decode_fetch_response, encode_fetch_response
from minibroker.protocol.framing import ProtocolViolation, _unexported

from mutations import overwrite_some

VERSIONS = range(4, 13)
SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_FT = FetchResponse.FetchableTopicResponse
_FP = _FT.PartitionData

i16 = st.integers(-2**15, 2**15 - 1)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)
names = st.text(max_size=20)
records = st.one_of(st.none(), st.binary(max_size=300))
aborted = st.one_of(st.none(), st.lists(st.tuples(i64, i64), max_size=3))

# (index, error, hw, lso, log_start, diverging_epoch, current_leader, snapshot_id, aborted,
#  preferred_read_replica, records)
partitions = st.lists(st.tuples(
    i32, i16, i64, i64, i64, st.one_of(st.none(), st.tuples(i32, i64)),
    st.one_of(st.none(), st.tuples(i32, i32)), st.one_of(st.none(), st.tuples(i64, i32)),
    aborted, i32, records), max_size=4)
topics = st.lists(st.tuples(names, partitions), max_size=4)


def _for_version(version: int, p: tuple) -> tuple:
    """The partition as `version` carries it (fields it lacks at their defaults)."""
    idx, err, hw, lso, lstart, div, leader, snap, abrt, prr, rec = p
    if version < 5:
        lstart = -1
    if version < 11:
        prr = -1
    if version < 12:
        div = leader = snap = None
    return idx, err, hw, lso, lstart, div, leader, snap, abrt, prr, rec


def _kafka_python(version, throttle, error, session, tops) -> bytes:
    resp = FetchResponse(throttle_time_ms=throttle, error_code=error, session_id=session, responses=[
        _FT(topic=name, partitions=[
            _FP(partition_index=idx, error_code=err, high_watermark=hw, last_stable_offset=lso,
                log_start_offset=lstart, preferred_read_replica=prr, records=rec,
                aborted_transactions=None if abrt is None else [
                    _FP.AbortedTransaction(producer_id=a, first_offset=b) for a, b in abrt],
                **({} if div is None else {"diverging_epoch": _FP.EpochEndOffset(
                    epoch=div[0], end_offset=div[1])}),
                **({} if leader is None else {"current_leader": _FP.LeaderIdAndEpoch(
                    leader_id=leader[0], leader_epoch=leader[1])}),
                **({} if snap is None else {"snapshot_id": _FP.SnapshotId(
                    end_offset=snap[0], epoch=snap[1])}))
            for idx, err, hw, lso, lstart, div, leader, snap, abrt, prr, rec in parts])
        for name, parts in tops])
    return bytes(resp.encode(version=version))


def _ours(view) -> tuple:
    return (view.throttle_time_ms, view.error_code, view.session_id, [
        (t.topic, [(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                    p.log_start_offset, None if p.diverging_epoch is None else tuple(p.diverging_epoch),
                    None if p.current_leader is None else tuple(p.current_leader),
                    p.aborted_transactions, p.preferred_read_replica,
                    None if p.records is None else bytes(p.records))
                   for p in t.partitions])
        for t in view.responses])


def _theirs(resp) -> tuple:
    return (resp.throttle_time_ms, resp.error_code, resp.session_id, [
        (t.topic, [(p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                    p.log_start_offset,
                    None if p.diverging_epoch is None else (p.diverging_epoch.epoch,
                                                            p.diverging_epoch.end_offset),
                    None if p.current_leader is None else (p.current_leader.leader_id,
                                                           p.current_leader.leader_epoch),
                    None if p.aborted_transactions is None else [
                        (a.producer_id, a.first_offset) for a in p.aborted_transactions],
                    p.preferred_read_replica, p.records)
                   for p in t.partitions])
        for t in resp.responses])


def _expected(version, throttle, error, session, tops) -> tuple:
    if version < 7:
        error = session = 0
    return (throttle, error, session, [
        (name, [(idx, err, hw, lso, lstart, div, leader, abrt, prr, rec)
                for idx, err, hw, lso, lstart, div, leader, _, abrt, prr, rec
                in (_for_version(version, p) for p in parts)])
        for name, parts in tops])


def _assert_views_of(view, body: bytes) -> None:
    for t in view.responses:
        for p in t.partitions:
            assert p.records is None or (isinstance(p.records, memoryview) and p.records.obj is body)


# ---------------------------------------------------------------------- agreement

@SETTINGS
@given(version=st.sampled_from(VERSIONS), throttle=i32, error=i16, session=i32, tops=topics)
def test_agrees_with_kafka_python(version, throttle, error, session, tops):
    tops = [(n, [_for_version(version, p) for p in parts]) for n, parts in tops]
    body = _kafka_python(version, throttle, error, session, tops)
    view = decode_fetch_response(memoryview(body), version)
    assert view.version == version
    assert _ours(view) == _theirs(FetchResponse.decode(body, version=version))
    assert _ours(view) == _expected(version, throttle, error, session, tops)
    _assert_views_of(view, body)


@SETTINGS
@given(version=st.sampled_from(VERSIONS), corr=i32, throttle=i32, error=i16, session=i32,
       tops=topics, cuts=st.lists(st.integers(0, 300), max_size=3))
def test_reads_back_our_own_encoder(version, corr, throttle, error, session, tops, cuts):
    tops = [(n, [_for_version(version, p)[:6] + (None, None) + _for_version(version, p)[8:]
                 for p in parts]) for n, parts in tops]        # our encoder writes no leader/snapshot
    ours = []
    for name, parts in tops:
        fps = []
        for idx, err, hw, lso, lstart, div, _, _, abrt, prr, rec in parts:
            chunks = None if rec is None else [rec[a:b] for a, b in
                                               zip([0, *sorted(cuts)], [*sorted(cuts), len(rec)])]
            fps.append(FetchPartition(idx, err, hw, lso, lstart, chunks, div, abrt, prr))
        ours.append((name, fps))
    wire = b"".join(bytes(b) for b in encode_fetch_response(version, corr, throttle, error, session,
                                                             ours))
    body = wire[4 + 4 + (version >= 12):]                   # size, correlation id, header tags
    view = decode_fetch_response(memoryview(body), version)
    assert _ours(view) == _expected(version, throttle, error, session, tops)
    _assert_views_of(view, body)


def _v12_by_hand(tag_top=b"\x00", tag_topic=b"\x00", part_tags=b"\x00", aborted=b"\x00",
                 records=b"\x04abc", topic_count=b"\x02") -> bytes:
    """One topic "t", one partition: each tag section (and a few lengths) given as wire bytes."""
    return (struct.pack(">ihi", 0, 0, 7) + topic_count + b"\x02t" + b"\x02"
            + struct.pack(">ihqqq", 3, 0, 10, 10, 1) + aborted + struct.pack(">i", -1) + records
            + part_tags + tag_topic + tag_top)


def _tagged_body(div_tags: bytes) -> bytes:
    div = struct.pack(">iq", 4, 99) + div_tags
    leader = struct.pack(">ii", 2, 8) + b"\x00"
    snap = struct.pack(">qi", 5, 1) + b"\x00"
    return _v12_by_hand(
        tag_top=b"\x01\x05\x02\xaa\xbb", tag_topic=b"\x02\x07\x00\x2a\x01x",
        part_tags=(b"\x04" + b"\x00" + bytes([len(div)]) + div + b"\x01" + bytes([len(leader)])
                   + leader + b"\x02" + bytes([len(snap)]) + snap + b"\x09\x01!"),
        aborted=b"\x02" + struct.pack(">qq", 11, 12) + b"\x01\x03\x01q")


def test_unknown_tags_are_skipped_at_every_level():
    body = _tagged_body(b"\x01\x07\x02zz")          # diverging_epoch with a tag of its own
    view = decode_fetch_response(memoryview(body), 12)
    p = view.responses[0].partitions[0]
    assert (tuple(p.diverging_epoch), tuple(p.current_leader)) == ((4, 99), (2, 8))
    assert p.aborted_transactions == [(11, 12)] and bytes(p.records) == b"abc"
    # kafka-python agrees (it cannot read tags inside a tagged struct: that one left out)
    assert _ours(view) == _theirs(FetchResponse.decode(_tagged_body(b"\x00"), version=12))


# ---------------------------------------------------------------------- bad input

@SETTINGS
@given(version=st.sampled_from(VERSIONS), tops=topics, data=st.data())
def test_truncated_or_extended_bodies_are_violations(version, tops, data):
    tops = [(n, [_for_version(version, p) for p in parts]) for n, parts in tops]
    body = _kafka_python(version, 0, 0, 1, tops)
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(ProtocolViolation):
        decode_fetch_response(memoryview(body[:cut]), version)
    with pytest.raises(ProtocolViolation):
        decode_fetch_response(memoryview(body + data.draw(st.binary(min_size=1, max_size=8))), version)


@pytest.mark.parametrize("version", [4, 5, 11, 12])
def test_every_truncation_of_a_full_response_is_a_violation(version):
    tops = [("topic", [_for_version(version, (1, 0, 9, 9, 2, (3, 7), (1, 4), (8, 2), [(5, 6)], 0,
                                              b"r" * 40)),
                       _for_version(version, (2, 6, 0, 0, 0, None, None, None, None, -1, None))])]
    body = _kafka_python(version, 0, 0, 1, tops)
    for cut in range(len(body)):
        with pytest.raises(ProtocolViolation):
            decode_fetch_response(memoryview(body[:cut]), version)


@SETTINGS
@given(version=st.sampled_from(VERSIONS), tops=topics, data=st.data())
def test_corrupted_bodies_raise_only_protocol_violation(version, tops, data):
    tops = [(n, [_for_version(version, p) for p in parts]) for n, parts in tops]
    body = overwrite_some(_kafka_python(version, 0, 0, 1, tops), data)
    try:
        decode_fetch_response(body, version)
    except ProtocolViolation:
        pass


def _v4(topic_count=1, name=b"\x00\x01t", part_count=1, aborted=b"\xff\xff\xff\xff",
        records=b"\x00\x00\x00\x03abc") -> bytes:
    return (struct.pack(">ii", 0, topic_count) + name + struct.pack(">i", part_count)
            + struct.pack(">ihqq", 0, 0, 5, 5) + aborted + records)


@pytest.mark.parametrize("version, body, why", [
    (4, b"\x00\x00", "truncated throttle_time_ms"),
    (7, b"\x00\x00\x00\x00\x00\x00\x00", "truncated error_code/session_id"),
    (4, _v4(topic_count=-2), "negative topic count"),
    (4, _v4(topic_count=1000), "topic count beyond the body"),
    (4, _v4(name=b"\xff\xff"), "null topic name"),
    (4, _v4(name=b"\xff\xfe"), "topic name length -2"),
    (4, _v4(name=b"\x7f\xfft"), "topic name past the end"),
    (4, _v4(name=b"\x00\x01\xff"), "bad UTF-8"),
    (4, _v4(part_count=-1), "negative partition count"),
    (4, _v4(aborted=b"\xff\xff\xff\xfe"), "aborted count -2"),
    (4, _v4(aborted=b"\x00\x00\x00\x01" + b"\x00" * 8), "aborted transaction truncated"),
    (4, _v4(records=b"\xff\xff\xff\xfe"), "records length -2"),
    (4, _v4(records=b"\x00\x00\x00\x09abc"), "records past the end"),
    (4, _v4() + b"\x00", "trailing byte"),
    (12, _v12_by_hand(topic_count=b"\x80\x80\x80\x80\x80\x01"), "overlong varint"),
    (12, _v12_by_hand(topic_count=b"\x00"), "null topic array"),
    (12, _v12_by_hand(records=b"\x09abc"), "compact records past the end"),
    (12, _v12_by_hand(aborted=b"\xff\xff\x03"), "aborted count beyond the body"),
    (12, _v12_by_hand(part_tags=b"\x01\x00\x0c" + struct.pack(">iq", 1, 2)),
     "diverging_epoch without its tag section"),
    (12, _v12_by_hand(part_tags=b"\x01\x00\x0e" + struct.pack(">iq", 1, 2) + b"\x00\x00"),
     "diverging_epoch with bytes left over"),
    (12, _v12_by_hand(part_tags=b"\x01\x00\x05" + struct.pack(">iq", 1, 2) + b"\x00"),
     "diverging_epoch shorter than its fields"),
    (12, _v12_by_hand(part_tags=b"\x01\x00\x0d" + struct.pack(">iq", 1, 2) + b"\x05"),
     "diverging_epoch's own tag count past its end"),
    (12, _v12_by_hand(part_tags=b"\x01\x01\x40\x00"), "current_leader tag past the end"),
    (12, _v12_by_hand(part_tags=b"\x01\x02\x40\x00"), "snapshot_id tag past the end"),
    (12, _v12_by_hand(part_tags=b"\x02\x09\x00"), "second partition tag missing"),
    (12, _v12_by_hand(tag_top=b"\x01\x05\x03ab"), "top-level tag past the end"),
    (12, _v12_by_hand(tag_top=b""), "top-level tag section missing"),
    (13, _v12_by_hand(), "v13 (topic ids) is not decoded here"),
    (3, _v4(), "v3 is not decoded here"),
])
def test_malformed(version, body, why):
    with pytest.raises(ProtocolViolation):
        decode_fetch_response(memoryview(body), version)


def test_the_hand_built_bodies_are_valid():
    """The malformed cases above differ from these in the one place they name."""
    assert bytes(decode_fetch_response(memoryview(_v4()), 4).responses[0].partitions[0].records) \
        == b"abc"
    assert decode_fetch_response(memoryview(_v12_by_hand()), 12).session_id == 7
    div = _v12_by_hand(part_tags=b"\x01\x00\x0d" + struct.pack(">iq", 1, 2) + b"\x00")
    assert decode_fetch_response(memoryview(div), 12).responses[0].partitions[0].diverging_epoch \
        == (1, 2)


# ---------------------------------------------------------------------- the client's raw responses

class _Transport:
    def __init__(self) -> None:
        self.written: list = []

    def writelines(self, parts) -> None:
        self.written.extend(parts)

    def get_extra_info(self, name, default=None):
        return default

    def close(self) -> None:
        pass


def _receive(conn: KafkaClientConnection, data: bytes) -> None:
    buf = conn.get_buffer(len(data))
    assert len(buf) >= len(data)
    buf[:len(data)] = data
    conn.buffer_updated(len(data))


async def test_raw_responses_are_views_of_the_receive_buffer():
    conn = KafkaClientConnection()
    conn.connection_made(_Transport())
    req = fetch_request("t", 0, 0)
    body = _kafka_python(12, 0, 0, 7, [("t", [(0, 0, 5, 5, 0, (1, 2), None, None, None, -1,
                                                b"x" * 100)])])
    raw = conn.send(req, 12, raw=True)
    generic = conn.send(req, 12)
    bad = conn.send(req, 12, raw=True)
    old = conn.send(req, 4, raw=True)
    body4 = _kafka_python(4, 0, 0, 0, [("t", [(0, 0, 5, 5, -1, None, None, None, None, -1, b"y")])])
    frames = [struct.pack(">i", 1) + b"\x02\x03\x01z\x04\x00" + body,   # header with two tags
              struct.pack(">i", 2) + b"\x00" + body,
              struct.pack(">i", 3) + b"\x01\x03\x09z",                  # header tag past the frame
              struct.pack(">i", 4) + body4]                             # v4: header v0, no tags
    _receive(conn, b"".join(struct.pack(">i", len(f)) + f for f in frames))
    view = await raw
    assert isinstance(view, memoryview) and view.readonly and bytes(view) == body
    assert view.obj is conn.reader._buf                  # no copy: the receive buffer itself
    p = decode_fetch_response(view, 12).responses[0].partitions[0]
    assert p.records.obj is conn.reader._buf and bytes(p.records) == b"x" * 100
    assert p.diverging_epoch == (1, 2)
    assert (await generic) == decode_response(response_class_for(req),
                                              memoryview(frames[1]), 12)   # other users unchanged
    with pytest.raises(ProtocolViolation):
        await bad
    assert bytes(await old) == body4
    assert not conn.closed and not conn.inflight


def _views_left(reader) -> bool:
    """Whether anything still holds a view of the reader's buffers, other than its own."""
    if any(not _unexported(s) for s in reader._spares):
        return True
    reader._view.release()
    try:
        return not _unexported(reader._buf)
    finally:
        reader._view = memoryview(reader._buf)


async def test_follower_keeps_no_view_of_a_handled_response():
    """Large fetched batches live in the follower connection's receive buffers, which are reused
    only once no view of them is left: between fetches the fetcher must hold none."""
    c = Cluster(brokers=3)
    await c.start()
    try:
        await c.create_topic("t", 1, 3)
        leader = await c.leader_of("t", 0)
        conn = await connect(c, leader)
        now = c.clock.now_ms()
        for i in range(4):
            await conn.request(produce_request("t", 0, batch([bytes([i]) * 200_000], now)), 9)
        conn.close()
        followers = [b for b in c.brokers if b != leader]

        def parked():
            for f in followers:
                fetcher = c.brokers[f].replica_manager.fetchers.get(leader)
                p = None if fetcher is None else fetcher.partitions.get(("t", 0))
                if p is None or fetcher._conn is None or p.log.log_end_offset != 4:
                    return False
                if _views_left(fetcher._conn.reader):
                    return False
            return True
        # (a frame that has arrived but that the fetcher has not yet taken is a view too: retry)
        await wait_until(parked, what="follower fetchers parked without views of old responses")
    finally:
        await c.stop()


# ---------------------------------------------------------------------- micro-benchmark

def _bench() -> None:
    import os
    import time

    req = fetch_request("t", 0, 0)
    rcls = response_class_for(req)
    for version in (12, 4):
        tops = [("topic", [_for_version(version, (i, 0, 100, 100, 0, None, None, None, None, -1,
                                                  os.urandom(1 << 20))) for i in range(4)])]
        body = _kafka_python(version, 0, 0, 1, tops)
        frame = memoryview(struct.pack(">i", 1) + (b"\x00" if version >= 12 else b"") + body)
        start = 5 if version >= 12 else 4

        def median_us(fn, n=200):
            times = []
            for _ in range(n):
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
            return sorted(times)[n // 2] * 1e6
        generic = median_us(lambda: decode_response(rcls, frame, version))
        ours = median_us(lambda: decode_fetch_response(frame[start:], version))
        print(f"FetchResponse v{version}, 4 partitions x 1 MiB records: kafka-python generic "
              f"{generic:8.1f} us, decode_fetch_response {ours:6.1f} us ({generic / ours:.0f}x)")


if __name__ == "__main__":
    _bench()
