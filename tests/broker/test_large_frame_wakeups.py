"""A large request frame wakes the broker every 256 KiB, not per TCP segment (SO_RCVLOWAT, Linux).

Real loopback sockets against an in-process broker: the first quarter of a 1 MB Produce frame
arrives, the broker asks the kernel to wait for 256 KiB more, the rest arrives, the request is
answered and the socket goes back to waking on every byte.
"""
from __future__ import annotations

import asyncio
import socket

import pytest

from kafka.protocol.producer import ProduceResponse

from cluster_helpers import batch, log_records, produce_request, wait_until
from minibroker.cluster import Cluster
from minibroker.network.client import decode_response, encode_request
from minibroker.network.sockopts import SO_RCVLOWAT, SocketTuning
from minibroker.protocol.framing import FrameReader


def test_missing_counts_the_rest_of_the_frame_begun():
    r = FrameReader(1 << 20)
    assert r.missing() == 0
    buf = r.get_buffer()
    buf[:6] = b"\x00\x00\x00\x0aab"          # a 10-byte frame, 2 bytes of it here
    assert r.buffer_updated(6) == [] and r.missing() == 8
    buf = r.get_buffer()
    buf[:8] = b"cdefghij"
    assert [bytes(f) for f in r.buffer_updated(8)] == [b"abcdefghij"] and r.missing() == 0


def _receive(r: FrameReader, data: bytes) -> tuple[list[bytes], list[int]]:
    """Feed `data` as a socket would (as much as each get_buffer offers); the frames, and the
    room offered at each frame boundary."""
    frames, rooms, pos = [], [], 0
    while pos < len(data):
        buf = r.get_buffer()
        if r.buffered == 0:
            rooms.append(len(buf))
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos:pos + n]
        frames += [bytes(f) for f in r.buffer_updated(n)]
        pos += n
    return frames, rooms


def test_a_frame_after_a_large_one_is_received_where_it_fits():
    # A producer's frames come alike: after a large one, the next is received into room for all of
    # it, not begun in the rest of the buffer and copied out when its size is known.
    r = FrameReader(1 << 24)
    large = [bytes([i]) * 200_000 for i in range(3)]
    frames, rooms = _receive(r, b"".join(len(f).to_bytes(4, "big") + f for f in large))
    assert frames == large
    assert len(rooms) == 3                  # every frame began at a boundary: no prefix copied
    assert rooms[0] == FrameReader.FIRST and all(room >= 200_004 for room in rooms[1:])
    # After a small frame the reader reads on into all the room it has.
    first, rooms = _receive(r, (100).to_bytes(4, "big") + b"s" * 100)
    second, rooms_after = _receive(r, (100).to_bytes(4, "big") + b"t" * 100)
    assert first + second == [b"s" * 100, b"t" * 100]
    assert rooms == [200_004] and rooms_after[0] > 200_004


def _lowat(conn) -> int:
    return conn.tuning._sock.getsockopt(socket.SOL_SOCKET, SO_RCVLOWAT)


@pytest.mark.skipif(SO_RCVLOWAT is None, reason="SO_RCVLOWAT is used on Linux only")
async def test_a_large_frame_is_read_in_256_kib_steps():
    async with Cluster(brokers=1) as c:
        await c.create_topic("t", 1, 1)
        b = c.brokers[1]
        records = batch([b"x" * 1_000_000], c.clock.now_ms())   # max.message.bytes: 1 MiB
        frame = b"".join(bytes(p) for p in encode_request(produce_request("t", 0, records, acks=1),
                                                          9, 5, "big"))
        reader, writer = await asyncio.open_connection(b.host, b.port)
        try:
            writer.write(frame[:256 * 1024])
            await writer.drain()
            me = writer.get_extra_info("sockname")
            conn = await wait_until(lambda: next((x for x in b.connections if x.peer == me), None),
                                    10, "the connection")
            await wait_until(lambda: conn.reader.missing() > 512 * 1024 and
                             _lowat(conn) == SocketTuning.WAIT_AT_MOST, 10,
                             "the broker waiting for more of the frame")
            writer.write(frame[256 * 1024:])
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
            body = memoryview(await reader.readexactly(size))
            part = decode_response(ProduceResponse, body, 9).responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, 0)
            assert _lowat(conn) == 1
            assert [len(v) for _, v in log_records(c, 1, "t", 0)] == [1_000_000]
        finally:
            writer.close()
