"""Queued request errors (Faults.push_request_errors) answer the next requests of any API key,
in dispatch, before the handler: with the code in every error field of the answer."""
from __future__ import annotations

import pytest
from kafka.errors import NotLeaderForPartitionError, RebalanceInProgressError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import HeartbeatRequest
from kafka.protocol.metadata import MetadataRequest

from minibroker.network import memory
from tests.cluster_helpers import (LIST_OFFSETS_VERSION, PRODUCE_VERSION, batch, lead_request,
                                   list_offsets_request, memory_broker, produce_request,
                                   produce_response, wire)

T = "t"
NOT_LEADER = NotLeaderForPartitionError.errno


@pytest.fixture
async def b():
    """A broker without sockets that leads T-0, told so on its controller listener (KIP-291)."""
    b = await memory_broker()
    try:
        control = memory.connect(b.control_handle)
        assert (await control.request(lead_request(T, 1), 7)).error_code == 0
        yield b
    finally:
        await b.stop()


async def test_queued_errors_answer_list_offsets_then_the_handler_again(b):
    client = memory.connect(b.handle)
    b.faults.push_request_errors(ApiKey.ListOffsets, [NotLeaderForPartitionError])
    first = await client.request(list_offsets_request(T, 0, -1), LIST_OFFSETS_VERSION)
    second = await client.request(list_offsets_request(T, 0, -1), LIST_OFFSETS_VERSION)
    [p1], [p2] = first.topics[0].partitions, second.topics[0].partitions
    assert (first.topics[0].name, p1.partition_index, p1.error_code, p1.offset) == \
        (T, 0, NOT_LEADER, -1)
    assert (p2.error_code, p2.offset) == (0, 0)         # the queue is empty again
    assert b.faults.errors_queued == 0


async def test_queued_errors_reach_group_and_metadata_apis_and_produce(b):
    client = memory.connect(b.handle)
    b.faults.push_request_errors(ApiKey.Heartbeat, [RebalanceInProgressError.errno])
    hb = await client.request(HeartbeatRequest(group_id="g", generation_id=1, member_id="m",
                                               group_instance_id=None), 4)
    assert hb.error_code == RebalanceInProgressError.errno
    b.faults.push_request_errors(ApiKey.Metadata, [NOT_LEADER])
    md = await client.request(MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=T, topic_id=None)],
        allow_auto_topic_creation=False, include_topic_authorized_operations=False), 12)
    assert [(t.name, t.error_code) for t in md.topics] == [(T, NOT_LEADER)]
    b.faults.push_request_errors(ApiKey.Produce, [NOT_LEADER])
    resp = await client.request(produce_request(T, 0, batch([b"a"], 0), acks=1),
                                PRODUCE_VERSION)
    assert resp == wire(produce_response(T, 0, NOT_LEADER), PRODUCE_VERSION)
    # Nothing was appended: the next produce is offset 0.
    resp = await client.request(produce_request(T, 0, batch([b"a"], 0), acks=1),
                                PRODUCE_VERSION)
    assert resp == wire(produce_response(T, 0, base_offset=0, log_start_offset=0),
                        PRODUCE_VERSION)
