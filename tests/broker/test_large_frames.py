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

from cluster_helpers import (_PPart, _PTopic, batch, log_records, produce_request,
                             wait_until)
from minibroker.cluster import Cluster
from minibroker.log.partition_log import BATCH_OVERHEAD
from minibroker.network.client import decode_response, encode_request
from minibroker.network.sockopts import TCP_QUICKACK
from minibroker.log.adoption import adoption, frame_records
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


def test_a_frame_of_several_large_record_sets_is_kept_whole():
    """Two partitions' batches of about half a frame each (a producer's request to a broker that
    leads both, a follower's fetch of them) are both kept; a small one beside them is copied."""
    frame = memoryview(bytearray(1000))
    halves = [frame[10:505], frame[505:1000]]
    assert not any(handed_over(h) for h in halves)
    assert frame_records(halves) == 990
    assert [adoption(h, 990) for h in halves] == [990, 990]
    small = frame[0:10]
    assert frame_records([small, *halves]) == 990 and adoption(small, 990) == 0
    assert frame_records([frame[0:300], frame[300:450]]) == 0       # under half the frame together
    assert frame_records([frame[0:600], memoryview(bytearray(600))]) == 0   # two frames
    assert frame_records([frame.toreadonly()[0:600]]) == 0          # a small frame's: read-only
    assert frame_records([None, b"", frame[0:600]]) == 600


async def test_two_partitions_of_one_produce_frame_are_kept_by_leader_and_followers():
    async with Cluster(brokers=3) as c:
        # Broker 1 leads both partitions (assignments: replicas by partition, the leader first).
        [res] = await c.channel.create_topics([("t", 2, 3, {0: [1, 2, 3], 1: [1, 3, 2]}, {})],
                                              validate_only=False)
        assert res.error_code == 0
        await c.wait_for_leaders("t")
        b = c.brokers[1]
        records = [batch([bytes([65 + i]) * 400_000], c.clock.now_ms()) for i in range(2)]
        req = produce_request("t", 0, records[0], acks=-1)
        req.topic_data = [_PTopic(name="t", partition_data=[
            _PPart(index=i, records=records[i]) for i in range(2)])]
        frame = b"".join(bytes(p) for p in encode_request(req, 9, 5, "big"))
        reader, writer = await asyncio.open_connection(b.host, b.port)
        try:
            writer.write(frame)
            size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
            body = memoryview(await reader.readexactly(size))
            parts = decode_response(ProduceResponse, body, 9).responses[0].partition_responses
            assert [(x.error_code, x.base_offset) for x in parts] == [(0, 0), (0, 0)]
        finally:
            writer.close()
        for node in (1, 2, 3):
            logs = [c.brokers[node].replica_manager.partitions[("t", i)].log for i in range(2)]
            await wait_until(lambda: all(g.log_end_offset == 1 for g in logs), 10, "replication")
            stored = [next(iter(g._live())) for g in logs]
            # Both batches live in one received frame (no copy), counted once between them.
            owners = {id(s.data.obj) for s in stored if isinstance(s.data, memoryview)}
            assert len(owners) == 1, f"broker {node} copied a batch"
            held = sum(s.held for s in stored) - 2 * BATCH_OVERHEAD
            assert len(stored[0].data.obj) - 2 <= held <= len(stored[0].data.obj), node


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
