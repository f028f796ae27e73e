"""Queued request errors (Faults.push_request_errors) answer the next requests of any API key,
in dispatch, before the handler: with the code in every error field of the answer, or (DISCONNECT)
by closing the connection; hold / drop / controls, per-broker latency, lost UpdateMetadata."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import NotLeaderForPartitionError, RebalanceInProgressError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import HeartbeatRequest
from kafka.protocol.metadata import MetadataRequest

from minibroker.broker.faults import DISCONNECT, DROP, Faults, Hold
from minibroker.network import memory
from minibroker.network.client import ConnectionClosed
from tests.cluster_helpers import (LIST_OFFSETS_VERSION, PRODUCE_VERSION, batch, connect,
                                   lead_request, list_offsets_request, memory_broker,
                                   produce_request, produce_response, wait_until, wire)

T = "t"
NOT_LEADER = NotLeaderForPartitionError.errno


async def test_queued_errors_answer_list_offsets_then_the_handler_again():
    b = await memory_broker()
    try:
        client = memory.connect(b.handle)
        control = memory.connect(b.control_handle)     # the controller's listener (KIP-291)
        assert (await control.request(lead_request(T, 1), 7)).error_code == 0
        b.faults.push_request_errors(ApiKey.ListOffsets, [NotLeaderForPartitionError])
        first = await client.request(list_offsets_request(T, 0, -1), LIST_OFFSETS_VERSION)
        second = await client.request(list_offsets_request(T, 0, -1), LIST_OFFSETS_VERSION)
        [p1], [p2] = first.topics[0].partitions, second.topics[0].partitions
        assert (first.topics[0].name, p1.partition_index, p1.error_code, p1.offset) == \
            (T, 0, NOT_LEADER, -1)
        assert (p2.error_code, p2.offset) == (0, 0)         # the queue is empty again
        assert b.faults.errors_queued == 0
    finally:
        await b.stop()


async def test_queued_errors_reach_group_and_metadata_apis_and_produce():
    b = await memory_broker()
    try:
        client = memory.connect(b.handle)
        control = memory.connect(b.control_handle)     # the controller's listener (KIP-291)
        assert (await control.request(lead_request(T, 1), 7)).error_code == 0
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
    finally:
        await b.stop()


# ---------------------------------------------------------------------- on a cluster, virtual time
METADATA = MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)


async def test_a_disconnect_in_an_error_stack_closes_the_connection_and_stacks_are_per_broker(
        cluster):
    cluster.faults.push_request_errors(ApiKey.Metadata, [NOT_LEADER, DISCONNECT], broker_id=2)
    one = await connect(cluster, 1)
    assert (await one.request(METADATA, 12)).brokers     # broker 1 has no stack
    two = await connect(cluster, 2)
    md = await two.request(METADATA, 12)
    assert md.throttle_time_ms == 0 and not md.brokers   # the generic error answer
    with pytest.raises(ConnectionClosed):
        await two.request(METADATA, 12)
    assert cluster.faults.errors_queued == 0 and not cluster.faults.armed
    again = await connect(cluster, 2)
    assert (await again.request(METADATA, 12)).brokers
    for c in (one, again):
        c.close()


def test_a_string_other_than_disconnect_is_refused_when_pushed():
    # It used to be queued and reach error_response as an "error code" at the next request.
    faults = Faults()
    with pytest.raises(ValueError, match="NOT_LEADER_OR_FOLLOWER"):
        faults.push_request_errors(ApiKey.Metadata, [NOT_LEADER, "NOT_LEADER_OR_FOLLOWER"])
    assert (faults.errors_queued, faults.armed) == (0, False)
    faults.push_request_errors(ApiKey.Metadata, [DISCONNECT])
    assert faults.pop_request_error(ApiKey.Metadata) == DISCONNECT


async def test_hold_answers_later_or_on_release_and_drop_never_answers(cluster, virtual_time):
    f = cluster.faults
    conn = await connect(cluster, 1)
    f.hold(ApiKey.Metadata, ms=5000, count=1)
    t0 = virtual_time.time()
    assert (await conn.request(METADATA, 12)).brokers
    assert virtual_time.time() - t0 >= 5
    f.hold(ApiKey.Metadata, count=1)                      # until released
    held = asyncio.ensure_future(conn.request(METADATA, 12))
    await asyncio.sleep(10)
    assert not held.done() and f.describe()["held"] == 1
    assert f.release(ApiKey.Metadata) == 1
    assert (await held).brokers
    f.drop(ApiKey.Metadata, broker_id=1)
    dropped = asyncio.ensure_future(conn.request(METADATA, 12))
    await asyncio.sleep(10)
    assert not dropped.done()
    assert f.describe()["rules"] == [dict(api_key=3, broker_id=1, action="drop", count=None,
                                          ms=None)]
    f.clear()                                             # a dropped request's connection closes
    with pytest.raises(ConnectionClosed):
        await dropped
    conn.close()


async def test_a_control_may_drop_or_hold(cluster, virtual_time):
    verdicts = [Hold(ms=1000), DROP]
    cluster.faults.control(ApiKey.Metadata, lambda req, ctx: verdicts.pop(0) if verdicts else None)
    conn = await connect(cluster, 1)
    t0 = virtual_time.time()
    assert (await conn.request(METADATA, 12)).brokers
    assert virtual_time.time() - t0 >= 1
    with pytest.raises(asyncio.TimeoutError):       # dropped: the client gives up
        await conn.request(METADATA, 12, timeout=10)
    conn.close()
    cluster.faults.clear()


async def test_latency_delays_every_response_of_one_broker(cluster, virtual_time):
    cluster.faults.set_latency(2, 250)
    slow, fast = await connect(cluster, 2), await connect(cluster, 1)
    t0 = virtual_time.time()
    await fast.request(METADATA, 12)
    assert virtual_time.time() - t0 < 0.25
    t0 = virtual_time.time()
    await slow.request(METADATA, 12)
    assert virtual_time.time() - t0 >= 0.25
    cluster.faults.set_latency(2, 0)
    assert not cluster.faults.armed
    slow.close(), fast.close()


async def test_lost_update_metadata_leaves_one_broker_stale(cluster):
    cluster.faults.lose_update_metadata(3, count=1)
    [res] = await cluster.channel.create_topics([("lost", 1, 1, None, {})], validate_only=False)
    assert res.error_code == 0
    await wait_until(lambda: all("lost" in cluster.brokers[b].metadata.topics for b in (1, 2)))
    assert "lost" not in cluster.brokers[3].metadata.topics
    assert cluster.faults.lost_update_metadata == {}      # one lost; the next arrives
    await cluster.create_topic("next", 1, 1)
    assert "next" in cluster.brokers[3].metadata.topics
    assert "lost" not in cluster.brokers[3].metadata.topics   # until something resends it
