"""broker/error_response.py: any request's answer with one error code (queued faults use it)."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import ProduceRequest

import minibroker.broker.handlers  # noqa: F401 — registers every handler
from minibroker.broker.dispatch import HANDLERS
from minibroker.broker.error_response import error_response
from tests.cluster_helpers import produce_request


@pytest.mark.parametrize("api_key", sorted(HANDLERS))
def test_every_served_api_and_version_has_an_error_response_that_encodes(api_key):
    h = HANDLERS[api_key]
    for version in range(h.versions[0], h.versions[1] + 1):
        resp = error_response(h.request_class(), version, 7)
        assert resp.encode(version=version)


def test_produce_mirrors_each_topic_and_partition_with_the_error():
    req = produce_request("a", 3, b"")
    req.topic_data.append(ProduceRequest.TopicProduceData(name="b", partition_data=[
        ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=b""),
        ProduceRequest.TopicProduceData.PartitionProduceData(index=5, records=b"")]))
    resp = error_response(req, 9, 6)
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in resp.responses] == [("a", [(3, 6, -1)]), ("b", [(0, 6, -1), (5, 6, -1)])]


def test_offset_fetch_mirrors_groups_topics_and_partitions():
    G = OffsetFetchRequest.OffsetFetchRequestGroup
    T = G.OffsetFetchRequestTopics
    req = OffsetFetchRequest(require_stable=False, groups=[
        G(group_id="g", member_id=None, member_epoch=-1,
          topics=[T(name="t", partition_indexes=[0, 1])])])
    resp = error_response(req, 8, 16)
    [group] = resp.groups
    assert (group.group_id, group.error_code) == ("g", 16)
    [topic] = group.topics
    assert [(p.partition_index, p.error_code, p.committed_offset) for p in topic.partitions] == \
        [(0, 16, -1), (1, 16, -1)]


def test_a_plain_list_of_keys_gets_one_answer_per_key():
    resp = error_response(FindCoordinatorRequest(key="", key_type=0,
                                                 coordinator_keys=["g1", "g2"]), 4, 15)
    assert [(c.key, c.error_code, c.node_id) for c in resp.coordinators] == \
        [("g1", 15, -1), ("g2", 15, -1)]
    resp = error_response(DescribeGroupsRequest(groups=["a", "b"],
                                                include_authorized_operations=False), 5, 16)
    assert [(g.group_id, g.error_code) for g in resp.groups] == [("a", 16), ("b", 16)]
