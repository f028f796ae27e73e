"""Large frames: each is received into a buffer of its own and handed over (the log keeps a produce
request's batch there instead of copying it), and a connection carrying them acknowledges data at
once (TCP_QUICKACK) rather than in Linux's delayed-ACK pingpong mode.

The socket tests use real loopback sockets against an in-process broker.
"""
from __future__ import annotations

import asyncio
import socket

import pytest

from kafka.protocol.producer import ProduceResponse

from cluster_helpers import batch, log_records, produce_request, wait_until
from minibroker.cluster import Cluster
from minibroker.network.client import decode_response, encode_request
from minibroker.network.sockopts import TCP_QUICKACK
from minibroker.protocol.framing import FrameReader, handed_over


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


def test_a_large_frame_gets_a_buffer_of_its_own_and_is_handed_over():
    # A producer's frames come alike: after a large one, the next one's size is read alone, so the
    # frame is received into a buffer of exactly its size (nothing of it copied but those 4 bytes),
    # which is then the frame's: handed over writable and never written by the reader again.
    r = FrameReader(1 << 24)
    large = [bytes([i]) * 200_000 for i in range(3)]
    got = []
    pos, data = 0, b"".join(len(f).to_bytes(4, "big") + f for f in large)
    rooms = []
    while pos < len(data):
        buf = r.get_buffer()
        rooms.append(len(buf))
        n = min(len(buf), len(data) - pos)
        buf[:n] = data[pos:pos + n]
        got += r.buffer_updated(n)
        pos += n
    assert [bytes(f) for f in got] == large
    # first frame: begun in the first buffer, then the rest in its own; later ones: size, then rest
    assert rooms == [FrameReader.FIRST, 200_004 - FrameReader.FIRST, 4, 200_000, 4, 200_000]
    for i, f in enumerate(got):
        assert not f.readonly and handed_over(f[10:]) and not handed_over(f[:100_000])
        assert len(f.obj) == 200_004            # the buffer holds exactly this frame
        f[0] = 0xFF                             # the taker's to patch
        assert bytes(f[1:]) == large[i][1:]
    # More traffic never writes into a handed-over buffer.
    frames, _ = _receive(r, b"".join(len(f).to_bytes(4, "big") + f for f in [b"s" * 100, b"t" * 300_000]))
    assert frames == [b"s" * 100, b"t" * 300_000]
    assert all(bytes(f[1:]) == large[i][1:] and f[0] == 0xFF for i, f in enumerate(got))
    # Small frames share buffers and stay read-only.
    small, _ = _receive(r, (100).to_bytes(4, "big") + b"u" * 100)
    assert small == [b"u" * 100]
    small_views = r.feed((5).to_bytes(4, "big") + b"vwxyz")
    assert small_views[0].readonly and not handed_over(small_views[0])


@pytest.mark.parametrize("first_part", [4, 256 * 1024])
async def test_a_large_produce_frame_arriving_in_parts_is_kept_where_it_arrived(first_part):
    async with Cluster(brokers=1) as c:
        await c.create_topic("t", 1, 1)
        b = c.brokers[1]
        records = batch([b"x" * 1_000_000], c.clock.now_ms())   # max.message.bytes: 1 MiB
        frame = b"".join(bytes(p) for p in encode_request(produce_request("t", 0, records, acks=1),
                                                          9, 5, "big"))
        reader, writer = await asyncio.open_connection(b.host, b.port)
        try:
            writer.write(frame[:first_part])
            await writer.drain()
            me = writer.get_extra_info("sockname")
            conn = await wait_until(lambda: next((x for x in b.connections if x.peer == me), None),
                                    10, "the connection")
            await wait_until(lambda: conn.reader.buffered == first_part, 10, "the first part")
            writer.write(frame[first_part:])
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
            body = memoryview(await reader.readexactly(size))
            part = decode_response(ProduceResponse, body, 9).responses[0].partition_responses[0]
            assert (part.error_code, part.base_offset) == (0, 0)
            assert [len(v) for _, v in log_records(c, 1, "t", 0)] == [1_000_000]
            # The log kept the batch in the frame's own receive buffer instead of copying it.
            (stored,) = b.replica_manager.partitions[("t", 0)].log._live()
            assert isinstance(stored.data, memoryview) and len(stored.data.obj) == len(frame)
        finally:
            writer.close()


def _quickack(conn) -> int:
    return conn.tuning._sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK)


@pytest.mark.skipif(TCP_QUICKACK is None, reason="TCP_QUICKACK is Linux's")
async def test_a_connection_carrying_large_frames_acknowledges_at_once():
    # Answering requests puts a socket in Linux's delayed-ACK "pingpong" mode; a connection that
    # streams large frames leaves it after each read, so what arrives is acknowledged at once.
    async with Cluster(brokers=1) as c:
        await c.create_topic("t", 1, 1)
        b = c.brokers[1]

        async def exchange(writer, reader, value: bytes) -> None:
            frame = b"".join(bytes(p) for p in encode_request(
                produce_request("t", 0, batch([value], c.clock.now_ms()), acks=1), 9, 5, "q"))
            writer.write(frame)
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
            await reader.readexactly(size)

        for value, quick in ((b"s" * 100, 0), (b"L" * 200_000, 1)):
            reader, writer = await asyncio.open_connection(b.host, b.port)
            try:
                me = writer.get_extra_info("sockname")
                for _ in range(5):
                    await exchange(writer, reader, value)
                conn = next(x for x in b.connections if x.peer == me)
                assert _quickack(conn) == quick, value[:1]
            finally:
                writer.close()
