"""Brokers of one process reach each other (replica fetchers, the controller's LeaderAndIsr) over
memory pipes unless minibroker.inter.broker.sockets=true: the same frames and handlers without a
socket. A stopped broker's pipes close and it cannot be reached until it starts again, as a closed
port; a frame over socket.request.max.bytes closes the pipe it came on, as over TCP."""
from __future__ import annotations

import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from minibroker.cluster import Cluster
from minibroker.log import partition_log
from minibroker.network import memory
from minibroker.network.client import ConnectionClosed
from minibroker.protocol.framing import FrameReader, ProtocolViolation
from tests.cluster_helpers import (batch, connect, log_records, produce_request, wait_until,
                                   wait_for_isr)

T = "t"


def fetcher_sockets(c: Cluster) -> dict[tuple[int, int], bool]:
    """(follower, leader) -> whether that fetcher's connection is a real socket."""
    return {(b.node_id, leader): f._conn.transport.get_extra_info("socket") is not None
            for b in c.brokers.values() for leader, f in b.replica_manager.fetchers.items()
            if f._conn is not None and not f._conn.closed}


async def produce(c: Cluster, value: bytes) -> int:
    conn = await connect(c, await c.leader_of(T, 0))
    try:
        resp = await conn.request(produce_request(T, 0, batch([value], c.clock.now_ms())), 9)
    finally:
        conn.close()
    return resp.responses[0].partition_responses[0].error_code


@pytest.mark.parametrize("sockets", [False, True], ids=["memory", "tcp"])
async def test_replication_runs_over_the_configured_transport_and_survives_a_restart(sockets):
    async with Cluster(brokers=3, minibroker_inter_broker_sockets=sockets) as c:
        await c.create_topic(T, 1, 3)
        assert await produce(c, b"a") == 0
        links = fetcher_sockets(c)
        assert len(links) == 2 and set(links.values()) == {sockets}
        leader = await c.leader_of(T, 0)
        follower = min(set(c.brokers) - {leader})
        await c.stop_broker(follower)
        await wait_for_isr(c, T, 0, set(c.brokers) - {follower})
        assert await produce(c, b"b") == 0
        await c.start_broker(follower)
        await wait_for_isr(c, T, 0, set(c.brokers))
        assert await produce(c, b"c") == 0
        await wait_until(lambda: [v for _, v in log_records(c, follower, T, 0)] == [b"a", b"b", b"c"],
                         10, "the restarted follower catches up")
        assert set(fetcher_sockets(c).values()) == {sockets}


async def test_a_stopped_broker_cannot_be_reached_in_memory_until_it_starts_again():
    async with Cluster(brokers=2) as c:
        net = c.faults.network
        b2 = c.brokers[2]
        conn = await net.connect(1, 2, b2.host, b2.port, client_id="test")
        assert conn.transport.get_extra_info("socket") is None
        assert (await conn.request(ApiVersionsRequest[3](client_software_name="t",
                                                         client_software_version="1"), 3)).error_code == 0
        await c.stop_broker(2)
        assert conn.closed
        with pytest.raises(ConnectionRefusedError):
            await net.connect(1, 2, b2.host, b2.port, client_id="test")
        await c.start_broker(2)
        again = await net.connect(1, 2, b2.host, b2.port, client_id="test")
        assert again.transport.get_extra_info("socket") is None
        again.close()


async def test_an_oversized_frame_on_a_pipe_closes_only_that_pipe():
    async with Cluster(brokers=1, socket_request_max_bytes=1000) as c:
        b = c.brokers[1]
        bad = memory.connect(b.handle, max_request_bytes=1000, connections=b.connections)
        good = memory.connect(b.handle, max_request_bytes=1000, connections=b.connections)
        fut = bad.send(produce_request(T, 0, batch([b"x" * 2000], c.clock.now_ms())), 9)
        with pytest.raises(ConnectionClosed):
            await fut
        resp = await good.request(ApiVersionsRequest[3](client_software_name="t",
                                                        client_software_version="1"), 3)
        assert resp.error_code == 0
        good.close()


def _frames(*sizes: int) -> bytearray:
    out = bytearray()
    for i, n in enumerate(sizes):
        out += n.to_bytes(4, "big") + bytes([i]) * n
    return out


def test_take_hands_over_large_frames_writable_and_small_ones_read_only():
    r = FrameReader(1 << 20)
    small, large = r.take(_frames(10, FrameReader.CHUNK + 1))
    assert small.readonly and bytes(small) == b"\x00" * 10
    assert not large.readonly and large.nbytes == FrameReader.CHUNK + 1
    with pytest.raises(ProtocolViolation):
        FrameReader(100).take(_frames(101))


def test_take_of_a_partial_frame_joins_the_stream_as_a_receive_would():
    r = FrameReader(1 << 20)
    whole = _frames(300, 5)
    assert r.take(bytearray(whole[:100])) == []
    first, second = r.take(bytearray(whole[100:]))
    assert bytes(first) == b"\x00" * 300 and bytes(second) == b"\x01" * 5


@pytest.mark.parametrize("sockets", [False, True], ids=["memory", "tcp"])
async def test_followers_share_their_leaders_bytes_only_in_memory_and_serve_them_after_it_stops(
        sockets, monkeypatch):
    handed_over = []        # batches a follower got as the leader's own views (gathered frames)

    def leader_batches(views, leader_log):
        shared = real(views, leader_log)
        handed_over.extend(shared[1] if shared else ())
        return shared
    real = partition_log._leader_batches
    monkeypatch.setattr(partition_log, "_leader_batches", leader_batches)
    async with Cluster(brokers=3, minibroker_inter_broker_sockets=sockets) as c:
        await c.create_topic(T, 1, 3)
        values = [bytes([i]) * 100_000 for i in range(3)]     # frames over FrameReader.CHUNK
        for v in values:
            assert await produce(c, v) == 0
        leader = await c.leader_of(T, 0)
        lead_log = c.brokers[leader].replica_manager.get(T, 0).log
        followers = sorted(set(c.brokers) - {leader})
        shared = [c.brokers[f].replica_manager.get(T, 0).log.stored_at(o).data
                  is lead_log.stored_at(o).data for f in followers for o in range(3)]
        assert shared == [not sockets] * 6
        # In memory each was handed over, not copied, compared and checked (frames of 100 kB).
        assert len(handed_over) == (0 if sockets else 6)
        await c.stop_broker(leader)
        await wait_until(lambda: c.controller.partition(T, 0).leader in followers, 10,
                         "a follower leads")
        for f in followers:
            assert [v for _, v in log_records(c, f, T, 0)] == values
