"""Responses leave a connection in request order, whichever handlers finish at once and whichever
wait: requests answered at once are written straight away only while nothing is queued ahead of
them (network/tcp.py). Raw loopback sockets against an in-process broker, on virtual time."""
from __future__ import annotations

import asyncio
import struct

from kafka.protocol.metadata import ApiVersionsRequest

from cluster_helpers import batch, fetch_request, produce_request
from minibroker.cluster import Cluster
from minibroker.network.client import encode_request

TOPIC = "t"


def encoded(req, version: int, corr: int) -> bytes:
    return b"".join(bytes(p) for p in encode_request(req, version, corr, "order"))


async def read_corr(reader: asyncio.StreamReader) -> int:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return struct.unpack(">i", (await reader.readexactly(size))[:4])[0]


async def test_answers_queue_behind_a_waiting_request_and_go_out_in_order():
    async with Cluster(brokers=1) as c:
        await c.create_topic(TOPIC, 1, 1)
        b = c.brokers[1]
        reader, writer = await asyncio.open_connection(b.host, b.port)
        # One write: an immediate answer, a long poll on the empty partition (waits up to 5 s),
        # two more immediate answers, then later a produce that ends the long poll.
        writer.write(encoded(ApiVersionsRequest(), 0, corr=1)
                     + encoded(fetch_request(TOPIC, 0, 0, max_wait_ms=5_000), 11, corr=2)
                     + encoded(ApiVersionsRequest(), 0, corr=3)
                     + encoded(ApiVersionsRequest(), 0, corr=4))
        await writer.drain()
        assert await read_corr(reader) == 1
        # Nothing else arrives while the fetch waits: 3 and 4 are held behind it.
        pending = asyncio.ensure_future(read_corr(reader))
        await asyncio.sleep(1)
        assert not pending.done()
        writer.write(encoded(produce_request(TOPIC, 0, batch([b"v"], c.clock.now_ms()), acks=1),
                             9, corr=5))
        await writer.drain()
        assert await pending == 2
        assert [await read_corr(reader) for _ in range(3)] == [3, 4, 5]
        # With the queue empty again, answers go out at once.
        writer.write(encoded(ApiVersionsRequest(), 0, corr=6))
        await writer.drain()
        assert await read_corr(reader) == 6
        writer.close()
