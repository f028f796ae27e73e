"""Connection-level defences (issue 25, item 5), against a real cluster over loopback sockets:
- a request that follows a bad frame in the same read is never executed (it could not be answered,
  and a client retrying it would apply it twice);
- a client that does not read its responses stops being read (Kafka mutes its channel): the
  responses queued for it stay bounded instead of growing with every request it sends;
- connections.max.idle.ms closes a connection that sent nothing for that long.
"""
from __future__ import annotations

import asyncio
import logging
import socket
import struct

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest

from cluster_helpers import batch, connect, fetch_request, produce_request
from minibroker.cluster import Cluster
from minibroker.network.client import encode_request

_CT = CreateTopicsRequest.CreatableTopic


def encoded(req, version: int, corr: int) -> bytes:
    return b"".join(bytes(p) for p in encode_request(req, version, corr, "raw"))


async def read_until_closed(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), 10)


@pytest.mark.timeout(60)
async def test_a_request_after_a_bad_frame_in_the_same_read_is_not_executed(caplog):
    async with Cluster(brokers=1) as c:
        b = c.brokers[1]
        reader, writer = await asyncio.open_connection(b.host, b.port)
        bad = struct.pack(">i", 8) + struct.pack(">hhi", 9999, 0, 1)        # unknown api key
        create = encoded(CreateTopicsRequest(topics=[_CT(
            name="after-bad", num_partitions=1, replication_factor=1, assignments=[],
            configs=[])], timeout_ms=5000, validate_only=False), 4, 2)
        writer.write(bad + create)
        await writer.drain()
        assert await read_until_closed(reader) == b""
        writer.close()
        await asyncio.sleep(0.3)
        assert "after-bad" not in b.metadata.topics
        assert "after-bad" not in c.controller.image.topics


@pytest.mark.timeout(120)
async def test_a_client_that_never_reads_its_fetch_responses_is_muted():
    # Virtual time jumps to the next timer whenever no socket is ready, which on a loaded machine
    # happens often while 80 MB crawl through a 4 KB window: without idle closing here, those
    # jumps cannot close the connections this test is still using.
    async with Cluster(brokers=1, connections_max_idle_ms=0) as c:
        await c.create_topic("t", 1, 1)
        conn = await connect(c, 1, "producer")
        for _ in range(8):                      # 8 x ~100 KB batches
            r = await conn.request(produce_request("t", 0, batch([b"x" * 1000] * 100, 0)), 9)
            assert r.responses[0].partition_responses[0].error_code == 0
        # A raw socket with a small receive buffer sends 100 Fetch requests (~800 KB answered
        # each) and does not read.
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        b = c.brokers[1]
        sock.connect((b.host, b.port))
        sock.setblocking(False)
        reader, writer = await asyncio.open_connection(sock=sock)
        fetch = fetch_request("t", 0, 0, max_bytes=1 << 20)
        writer.write(b"".join(encoded(fetch, 4, i) for i in range(100)))
        await asyncio.sleep(1.0)
        [server_side] = [s for s in b.connections if s.peer[1] == sock.getsockname()[1]]
        queued = server_side.transport.get_write_buffer_size()
        print(f"queued response bytes {queued}, requests received but not yet handled "
              f"{len(server_side._deferred)}")
        # Before, every response read so far was queued at once (100 x ~800 KB here).
        assert queued < 8 * 1024 * 1024
        assert server_side._paused_reading
        # The healthy client is still served.
        assert (await conn.request(ApiVersionsRequest(), 3)).error_code == 0
        # Once the client reads, every request is answered, in order.
        for corr in range(100):
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            body = await reader.readexactly(size)
            assert struct.unpack_from(">i", body)[0] == corr
        writer.close()
        conn.close()


@pytest.mark.timeout(60)
async def test_connections_max_idle_ms_closes_an_idle_connection(caplog):
    caplog.set_level(logging.DEBUG, "minibroker")
    async with Cluster(brokers=1, connections_max_idle_ms=400) as c:
        b = c.brokers[1]
        idle_r, idle_w = await asyncio.open_connection(b.host, b.port)
        busy = await connect(c, 1, "busy")
        for _ in range(12):                    # 1.2 s of requests every 100 ms
            assert (await busy.request(ApiVersionsRequest(), 3)).error_code == 0
            await asyncio.sleep(0.1)
        assert await read_until_closed(idle_r) == b""
        assert not busy.closed
        levels = {r.levelno for r in caplog.records
                  if "idle for more than connections.max.idle.ms=400" in r.getMessage()}
        assert levels == {logging.DEBUG}        # routine, as Kafka's Selector logs it
        idle_w.close()
        busy.close()


@pytest.mark.timeout(60)
async def test_accept_errors_past_the_fd_limit_are_one_line_per_interval(caplog):
    """asyncio reports each failed accept (EMFILE) with a traceback and retries every second; a
    listener's loop reports them as one line per 10 s with a count instead."""
    import errno
    async with Cluster(brokers=1):
        loop = asyncio.get_running_loop()
        caplog.clear()
        for _ in range(1000):
            loop.call_exception_handler({
                "message": "socket.accept() out of system resource",
                "exception": OSError(errno.EMFILE, "Too many open files")})
        lines = [r for r in caplog.records if "accept" in r.getMessage()]
        assert len(lines) == 1, [r.getMessage() for r in lines]
        assert lines[0].exc_info is None
        assert "Too many open files" in lines[0].getMessage()
