"""The hand-rolled hot-path codecs (minibroker.protocol.fast) agree with kafka-python's generic codec.

Produce requests: random requests encoded by kafka-python decode to the same fields, with records as
zero-copy views of the input; truncated or extended bodies raise ProtocolViolation.
Fetch responses: our buffer list is byte-identical to kafka-python's encoding of the same response
(v13+: topic ids; v12+: KIP-951 current_leader; v16+: node_endpoints).
"""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.producer import ProduceRequest

from minibroker.protocol.fast import FetchPartition, NodeEndpoint, decode_produce, encode_fetch_response
from minibroker.protocol.framing import ProtocolViolation
from minibroker.protocol.messages import ProduceRequestKip253

PRODUCE_VERSIONS = range(3, 13)
FETCH_VERSIONS = range(4, 18)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_TD = ProduceRequest.TopicProduceData
_PD = _TD.PartitionProduceData
_FT = FetchResponse.FetchableTopicResponse
_FP = _FT.PartitionData

i16 = st.integers(-2**15, 2**15 - 1)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)
names = st.text(min_size=0, max_size=20)
records = st.one_of(st.none(), st.binary(max_size=300))

produce_topics = st.lists(st.tuples(names, st.lists(st.tuples(i32, records), max_size=4)), max_size=4)


def _produce(txn, acks, timeout, topics) -> ProduceRequest:
    return ProduceRequest(transactional_id=txn, acks=acks, timeout_ms=timeout, topic_data=[
        _TD(name=n, partition_data=[_PD(index=i, records=r) for i, r in parts]) for n, parts in topics])


def _check_same(view, req) -> None:
    assert (view.transactional_id, view.acks, view.timeout_ms) == \
        (req.transactional_id, req.acks, req.timeout_ms)
    assert len(view.topics) == len(req.topic_data)
    for vt, rt in zip(view.topics, req.topic_data):
        assert vt.name == rt.name
        assert [(p.index, None if p.records is None else bytes(p.records)) for p in vt.partitions] == \
            [(p.index, p.records) for p in rt.partition_data]
        assert all(p.records is None or isinstance(p.records, memoryview) for p in vt.partitions)


@SETTINGS
@given(version=st.sampled_from(PRODUCE_VERSIONS), txn=st.one_of(st.none(), names), acks=i16,
       timeout=i32, topics=produce_topics)
def test_produce_decoder_agrees_with_kafka_python(version, txn, acks, timeout, topics):
    req = _produce(txn, acks, timeout, topics)
    body = bytes(req.encode(version=version))
    view = decode_produce(memoryview(body), version)
    _check_same(view, ProduceRequest.decode(body, version=version))
    _check_same(view, req)
    assert view.version == version


@SETTINGS
@given(version=st.sampled_from(range(9, 13)), count=i32, topics=produce_topics)
def test_produce_decoder_reads_kip253_tag_and_skips_unknown_tags(version, count, topics):
    req = ProduceRequestKip253(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequestKip253.TopicProduceData(
            name=n, undeleted_partition_count=count,
            partition_data=[ProduceRequestKip253.TopicProduceData.PartitionProduceData(index=i, records=r)
                            for i, r in parts]) for n, parts in topics])
    body = bytes(req.encode(version=version))
    view = decode_produce(memoryview(body), version)
    _check_same(view, ProduceRequest.decode(body, version=version))
    expect = count if count != -1 else -1    # the default is not written
    assert all(t.undeleted_partition_count == expect for t in view.topics)


def test_produce_records_are_zero_copy_views():
    body = bytearray(_produce(None, 1, 100, [("t", [(0, b"x" * 64)])]).encode(version=9))
    view = decode_produce(memoryview(body), 9)
    rec = view.topics[0].partitions[0].records
    i = body.index(b"x" * 64)
    body[i] = ord("y")                           # the view sees the frame's bytes, not a copy
    assert bytes(rec[:1]) == b"y"


@SETTINGS
@given(version=st.sampled_from(PRODUCE_VERSIONS), txn=st.one_of(st.none(), names), acks=i16,
       timeout=i32, topics=produce_topics, data=st.data())
def test_produce_truncated_or_extended_bodies_are_violations(version, txn, acks, timeout, topics, data):
    body = bytes(_produce(txn, acks, timeout, topics).encode(version=version))
    cut = data.draw(st.integers(0, len(body) - 1))
    with pytest.raises(ProtocolViolation):
        decode_produce(memoryview(body[:cut]), version)
    extra = data.draw(st.binary(min_size=1, max_size=8))
    with pytest.raises(ProtocolViolation):
        decode_produce(memoryview(body + extra), version)


@SETTINGS
@given(version=st.sampled_from(PRODUCE_VERSIONS), topics=produce_topics, data=st.data())
def test_produce_corrupted_bodies_raise_only_protocol_violation(version, topics, data):
    body = bytearray(_produce(None, 1, 5, topics).encode(version=version))
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        decode_produce(memoryview(bytes(body)), version)
    except ProtocolViolation:
        pass


@pytest.mark.parametrize("body, why", [
    (b"\xff\xff\x00\x01\x00\x00\x00\x64\xff\xff\xff\xfe", "negative topic count"),
    (b"\xff\xff\x00\x01\x00\x00\x00\x64\x00\x00\x00\x01\xff\xff", "null topic name"),
    (b"\xff\xfe\x00\x01\x00\x00\x00\x64\x00\x00\x00\x00", "string length -2"),
    (b"\xff\xff\x00\x01\x00\x00\x00\x64\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01"
     b"\x00\x00\x00\x00\xff\xff\xff\xfe", "records length -2"),
    (b"\xff\xff\x00\x01\x00\x00\x00\x64\x00\x00\x00\x01\x00\x01\xff\x00\x00\x00\x00", "bad UTF-8"),
])
def test_produce_malformed_v3(body, why):
    with pytest.raises(ProtocolViolation):
        decode_produce(memoryview(body), 3)


def test_produce_overlong_varint_is_a_violation():
    with pytest.raises(ProtocolViolation):
        decode_produce(memoryview(b"\x80\x80\x80\x80\x80\x80\x01"), 9)


# ------------------------------------------------------------------------------------------ Fetch

def _chunks(data: bytes | None, cuts: list[int]):
    if data is None:
        return None
    out, last = [], 0
    for c in sorted(min(c, len(data)) for c in cuts):
        out.append(memoryview(data)[last:c])
        last = c
    out.append(memoryview(data)[last:])
    return out


fetch_partitions = st.lists(st.tuples(
    i32, i16, i64, i64, i64, st.one_of(st.none(), st.binary(max_size=200)),
    st.lists(st.integers(0, 200), max_size=3),
    st.one_of(st.none(), st.tuples(i32, i64)),
    st.one_of(st.none(), st.lists(st.tuples(i64, i64), max_size=2)), i32,
    st.one_of(st.none(), st.tuples(i32, i32))), max_size=4)
node_endpoints = st.lists(st.builds(NodeEndpoint, i32, names, i32, st.one_of(st.none(), names)),
                          max_size=3)


@SETTINGS
@given(version=st.sampled_from(FETCH_VERSIONS), corr=i32, throttle=i32, error=i16, session=i32,
       topics=st.lists(st.tuples(names, st.uuids(), fetch_partitions), max_size=4),
       endpoints=node_endpoints)
def test_fetch_encoder_is_byte_identical_to_kafka_python(version, corr, throttle, error, session, topics,
                                                         endpoints):
    ours_topics, theirs_topics = [], []
    for name, topic_id, parts in topics:
        ours, theirs = [], []
        for idx, err, hw, lso, lstart, rec, cuts, div, aborted, prr, leader in parts:
            if version < 12:
                div = leader = None
            if version < 11:
                prr = -1
            if version < 5:
                lstart = -1
            ours.append(FetchPartition(idx, err, hw, lso, lstart, _chunks(rec, cuts), div, aborted, prr,
                                       leader))
            kw = {}
            if div is not None:
                kw["diverging_epoch"] = _FP.EpochEndOffset(epoch=div[0], end_offset=div[1])
            if leader is not None:
                kw["current_leader"] = _FP.LeaderIdAndEpoch(leader_id=leader[0], leader_epoch=leader[1])
            theirs.append(_FP(partition_index=idx, error_code=err, high_watermark=hw,
                              last_stable_offset=lso, log_start_offset=lstart,
                              aborted_transactions=None if aborted is None else [
                                  _FP.AbortedTransaction(producer_id=a, first_offset=b) for a, b in aborted],
                              preferred_read_replica=prr, records=rec, **kw))
        ours_topics.append((topic_id if version >= 13 else name, ours))
        theirs_topics.append(_FT(topic_id=topic_id, partitions=theirs) if version >= 13 else
                             _FT(topic=name, partitions=theirs))
    if version < 16:
        endpoints = []
    parts = encode_fetch_response(version, corr, throttle, error, session, ours_topics, endpoints)
    wire = b"".join(bytes(p) for p in parts)
    resp = FetchResponse(throttle_time_ms=throttle, error_code=error, session_id=session,
                         responses=theirs_topics, node_endpoints=[
                             FetchResponse.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port,
                                                        rack=e.rack) for e in endpoints])
    body = bytes(resp.encode(version=version))
    header = struct.pack(">i", corr) + (b"\x00" if version >= 12 else b"")
    assert wire == struct.pack(">i", len(header) + len(body)) + header + body
    # and kafka-python reads it back
    back = FetchResponse.decode(wire[4 + len(header):], version=version)
    assert [t.topic_id if version >= 13 else t.topic for t in back.responses] == \
        [i if version >= 13 else n for n, i, _ in topics]


def test_fetch_encoder_passes_record_views_through_uncopied():
    stored = memoryview(bytearray(b"b" * 1000)).toreadonly()
    parts = encode_fetch_response(12, 7, 0, 0, 0, [("t", [FetchPartition(0, 0, 10, 10, 0, [stored])])])
    assert any(p is stored for p in parts)
