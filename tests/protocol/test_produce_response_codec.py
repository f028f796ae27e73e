"""The hand-rolled ProduceResponse encoder is byte-identical to kafka-python's, for every version
Produce is served at (3-12), with and without error messages and unicode topic names, and with
KIP-951's current_leader and node_endpoints (v10+)."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceResponse

from minibroker.protocol.fast import NodeEndpoint
from minibroker.protocol.framing import frame_parts, response_header
from minibroker.protocol.produce_response import PartitionResult, encode_produce_response

_T = ProduceResponse.TopicProduceResponse
_P = _T.PartitionProduceResponse
i16 = st.integers(-2**15, 2**15 - 1)
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)
partitions = st.lists(st.tuples(i32, i16, i64, i64, i64, st.one_of(st.none(), st.text(max_size=200)),
                                st.one_of(st.none(), st.tuples(i32, i32))), max_size=4)
node_endpoints = st.lists(st.builds(NodeEndpoint, i32, st.text(max_size=20), i32,
                                    st.one_of(st.none(), st.text(max_size=10))), max_size=3)
# Long enough names and many partitions push compact lengths past one varint byte.
topics = st.dictionaries(st.text(max_size=150), partitions, max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(version=st.integers(3, 12), corr=i32, throttle=i32, topics=topics, endpoints=node_endpoints)
def test_produce_response_is_byte_identical_to_kafka_python(version, corr, throttle, topics, endpoints):
    if version < 10:        # KIP-951's tags do not exist before v10
        topics = {name: [p[:6] + (None,) for p in parts] for name, parts in topics.items()}
        endpoints = []
    ours = {name: [PartitionResult(*p[:6]) for p in parts] for name, parts in topics.items()}
    for name, parts in topics.items():
        for result, p in zip(ours[name], parts):
            result.current_leader = p[6]
    generic = ProduceResponse(throttle_time_ms=throttle, node_endpoints=[
        ProduceResponse.NodeEndpoint(node_id=e.node_id, host=e.host, port=e.port, rack=e.rack)
        for e in endpoints], responses=[
        _T(name=name, partition_responses=[
            _P(index=i, error_code=e, base_offset=b, log_append_time_ms=t, log_start_offset=s,
               record_errors=[], error_message=m, **({} if leader is None else {
                   "current_leader": _P.LeaderIdAndEpoch(leader_id=leader[0],
                                                         leader_epoch=leader[1])}))
            for i, e, b, t, s, m, leader in parts])
        for name, parts in topics.items()])
    expected = b"".join(frame_parts([response_header(corr, version >= 9),
                                     bytes(generic.encode(version=version))]))
    assert b"".join(encode_produce_response(version, corr, ours, throttle, endpoints)) == expected


def test_many_partitions_use_multi_byte_compact_counts():
    parts = [PartitionResult(i, 0, i) for i in range(300)]
    out = b"".join(encode_produce_response(9, 7, {"t": parts}))
    decoded = ProduceResponse.decode(out[4 + 5:], version=9)
    assert [p.base_offset for p in decoded.responses[0].partition_responses] == list(range(300))
