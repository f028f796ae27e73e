"""Metadata responses are spliced from a skeleton and per-topic encoded entries; the result must be
byte-identical to encoding the whole response at once, for every version and any number of topics
(past 127 the compact array count takes two bytes)."""
from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minibroker.broker.handlers.k03_metadata import (MetadataResponse, _Broker, _encode_entry,
                                                     _error_entry, _splice, _Partition, _Topic)

names = st.text(min_size=1, max_size=30)
partition = st.builds(
    lambda i, leader, epoch, replicas, pe: _Partition(
        error_code=0, partition_index=i, leader_id=leader, leader_epoch=epoch,
        replica_nodes=replicas, isr_nodes=replicas[:1], offline_replicas=[], partition_epoch=pe),
    st.integers(0, 1000), st.integers(-1, 5), st.integers(0, 2**31 - 1),
    st.lists(st.integers(0, 5), max_size=3), st.integers(-1, 100))
topic = st.builds(
    lambda name, parts, internal, counts: _Topic(
        error_code=0, name=name, topic_id=uuid.uuid4(), is_internal=internal, partitions=parts,
        authorized_operations=None, initial_partition_count=counts[0],
        undeleted_partition_count=counts[1]),
    names, st.lists(partition, max_size=4), st.booleans(),
    st.tuples(st.integers(-1, 64), st.integers(-1, 64)))
entries = st.lists(st.one_of(topic, st.builds(lambda n: _error_entry(3, n), names)), max_size=6)


def _response(topics, cluster_id, max_epoch):
    return MetadataResponse(
        throttle_time_ms=0, brokers=[_Broker(node_id=1, host="127.0.0.1", port=9092, rack=None),
                                     _Broker(node_id=2, host="h", port=1, rack="r")],
        cluster_id=cluster_id, controller_id=1, topics=topics, authorized_operations=None,
        error_code=0, max_partition_epoch=max_epoch)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(version=st.integers(0, 13), topics=entries, cluster_id=st.one_of(st.none(), names),
       max_epoch=st.integers(-1, 1000), many=st.booleans())
def test_spliced_response_is_byte_identical(version, topics, cluster_id, max_epoch, many):
    if many:
        topics = topics * 40            # up to 240 entries: multi-byte compact counts
    whole = bytes(_response(topics, cluster_id, max_epoch).encode(version=version))
    spliced = _splice(_response([], cluster_id, max_epoch), version,
                      [_encode_entry(t, version) for t in topics])
    assert spliced == whole
