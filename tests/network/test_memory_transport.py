"""A broker's handlers driven over network/memory.py: the same framing and in-order answers as
TCP, with no socket, port or controller."""
from __future__ import annotations

import asyncio

from kafka.protocol.metadata import ApiVersionsRequest

from minibroker.broker.dispatch import supported_versions
from minibroker.network import memory
from tests.cluster_helpers import (FETCH_VERSION, PRODUCE_VERSION, batch, fetch_request,
                                   lead_request, memory_broker, produce_request, produce_response,
                                   wire)

T = "t"


async def test_api_versions_over_the_pipe_lists_every_registered_api():
    b = await memory_broker()
    try:
        client = memory.connect(b.handle, connections=b.connections)
        resp = await client.request(ApiVersionsRequest(client_software_name="t",
                                                       client_software_version="1"), 3)
        assert resp.error_code == 0
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == \
            supported_versions()
        assert b.port == 0 and len(b.connections) == 1      # no socket was opened
    finally:
        await b.stop()
    assert client.closed                # stop closed the server end, and so the pipe


async def test_produce_then_fetch_without_sockets_and_answers_in_request_order():
    b = await memory_broker()
    try:
        client = memory.connect(b.handle, connections=b.connections)
        control = memory.connect(b.control_handle)     # the controller's listener (KIP-291)
        lai = await control.request(lead_request(T, 1), 7)
        assert lai.error_code == 0 and lai.topics[0].partition_errors[0].error_code == 0
        resp = await client.request(produce_request(T, 0, batch([b"a"], 1000), acks=1),
                                    PRODUCE_VERSION)
        assert resp == wire(produce_response(T, 0, base_offset=0, log_start_offset=0),
                            PRODUCE_VERSION)
        # A long-poll Fetch past the end, then a Produce on the same connection: the Produce
        # completes first inside the broker (it wakes the Fetch), but answers leave in request
        # order, so the Fetch's answer, carrying the new batch, arrives before the Produce's.
        done = []
        fetch = client.send(fetch_request(T, 0, 1, max_wait_ms=30_000), FETCH_VERSION)
        fetch.add_done_callback(lambda _: done.append("fetch"))
        produce = client.send(produce_request(T, 0, batch([b"b"], 2000), acks=1), PRODUCE_VERSION)
        produce.add_done_callback(lambda _: done.append("produce"))
        fetched, produced = await asyncio.gather(fetch, produce)
        assert done == ["fetch", "produce"]
        assert produced.responses[0].partition_responses[0].base_offset == 1
        part = fetched.responses[0].partitions[0]
        assert (part.error_code, part.high_watermark) == (0, 2)
        assert part.records is not None and len(part.records) > 0
    finally:
        await b.stop()
