"""The follower's hand-encoded FetchRequest v12 is byte for byte kafka-python's."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest

from minibroker.protocol.fetch_request import encode_follower_fetch

_T = FetchRequest.FetchTopic
_P = _T.FetchPartition
i32 = st.integers(-2**31, 2**31 - 1)
i64 = st.integers(-2**63, 2**63 - 1)
partitions = st.lists(st.tuples(i32, i32, i64, i32, i64, i32), max_size=4)
topics = st.lists(st.tuples(st.text(max_size=300), partitions), max_size=4)
forgotten = st.lists(st.tuples(st.text(max_size=300), st.lists(i32, max_size=4)), max_size=3)


@settings(max_examples=200, deadline=None)
@given(replica_id=i32, max_wait_ms=i32, min_bytes=i32, max_bytes=i32, topics=topics,
       session=st.tuples(i32, st.integers(-1, 2**31 - 1)), forgotten=forgotten)
def test_follower_fetch_matches_kafka_python(replica_id, max_wait_ms, min_bytes, max_bytes, topics,
                                             session, forgotten):
    req = FetchRequest(
        replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=0, session_id=session[0], session_epoch=session[1], rack_id="",
        forgotten_topics_data=[FetchRequest.ForgottenTopic(topic=name, partitions=pids)
                               for name, pids in forgotten],
        topics=[_T(topic=name, partitions=[
            _P(partition=p, current_leader_epoch=e, fetch_offset=o, last_fetched_epoch=le,
               log_start_offset=ls, partition_max_bytes=mb) for p, e, o, le, ls, mb in parts])
            for name, parts in topics])
    assert encode_follower_fetch(replica_id, max_wait_ms, min_bytes, max_bytes, topics,
                                 session[0], session[1], forgotten) == req.encode(version=12)
