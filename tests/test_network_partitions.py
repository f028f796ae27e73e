"""Network partitions on demand (Cluster.partition_network / heal_network, isolate_clients), on
virtual time: Kafka's behaviour follows from the cut links alone — a follower cut from its leader
leaves the ISR after replica.lag.time.max.ms, a broker cut from the active controller is fenced
after broker.session.timeout.ms, a controller cut from the quorum's majority resigns, acks=all
below min.insync.replicas fails NOT_ENOUGH_REPLICAS, and nothing acknowledged is lost."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import NotEnoughReplicasError
from kafka.protocol.metadata import MetadataRequest

from cluster_helpers import (batch, connect, log_records, produce_request, wait_for_isr,
                             wait_until)
from minibroker.cluster import Cluster
from minibroker.network.client import ConnectionClosed
from minibroker.network.partitions import LinkDown

T = "t"
LAG_MS = 3000


# Inter-broker links over memory pipes (the default in one process) and over loopback TCP.
@pytest.fixture(params=[False, True], ids=["memory", "tcp"])
async def c(request):
    async with Cluster(brokers=3, replica_lag_time_max_ms=LAG_MS,
                       minibroker_inter_broker_sockets=request.param) as cluster:
        yield cluster


async def produce(c: Cluster, broker_id: int, value: bytes, acks: int = -1) -> tuple[int, int]:
    """(error code, base offset) of one produce of `value` to T-0 through broker_id."""
    conn = await connect(c, broker_id)
    try:
        resp = await conn.request(produce_request(T, 0, batch([value], c.clock.now_ms()),
                                                  acks=acks), 9)
    finally:
        conn.close()
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


METADATA = MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                               include_topic_authorized_operations=False)


async def metadata(c: Cluster, broker_id: int):
    conn = await connect(c, broker_id)
    try:
        return await conn.request(METADATA, 12)
    finally:
        conn.close()


def fenced(c: Cluster, broker_id: int) -> bool:
    return c.controller.image.brokers[broker_id].fenced


async def test_a_follower_cut_from_its_leader_leaves_the_isr_after_the_lag_time(c):
    await c.create_topic(T, 1, 3, {"min.insync.replicas": "3"})
    ctl = c.controller_node_id
    leader, follower = [b for b in (1, 2, 3) if b != ctl]
    await c.move_leader(T, 0, leader)
    assert await produce(c, leader, b"before") == (0, 0)
    loop = asyncio.get_running_loop()
    cut_at = loop.time()
    await c.partition_network([follower], [leader])     # both still reach the controller
    await wait_for_isr(c, T, 0, {leader, ctl})
    assert (loop.time() - cut_at) * 1000 >= LAG_MS       # not before replica.lag.time.max.ms
    assert not fenced(c, follower) and not fenced(c, leader)
    # ISR 2 < min.insync.replicas 3: acks=all is refused, acks=1 is not
    assert await produce(c, leader, b"refused") == (NotEnoughReplicasError.errno, -1)
    assert await produce(c, leader, b"one", acks=1) == (0, 1)
    assert log_records(c, follower, T, 0) == [(0, b"before")]
    await c.heal_network()
    await wait_for_isr(c, T, 0, {1, 2, 3})
    assert await produce(c, leader, b"after") == (0, 2)
    await wait_until(lambda: len(log_records(c, follower, T, 0)) == 3, what="caught up")
    assert log_records(c, follower, T, 0) == [(0, b"before"), (1, b"one"), (2, b"after")]


async def test_a_leader_cut_from_the_controller_is_fenced_and_loses_nothing_acknowledged(c):
    await c.create_topic(T, 1, 3, {"min.insync.replicas": "2"})
    ctl = c.controller_node_id
    cut = next(b for b in (1, 2, 3) if b != ctl)
    await c.move_leader(T, 0, cut)
    assert await produce(c, cut, b"acked") == (0, 0)
    loop = asyncio.get_running_loop()
    cut_at = loop.time()
    await c.partition_network([cut], [b for b in (1, 2, 3) if b != cut])
    await wait_until(lambda: fenced(c, cut), what="fenced")
    assert (loop.time() - cut_at) * 1000 >= c.config.broker_session_timeout_ms
    st = await c.partition_state(T, 0)
    assert st["leader"] != cut and cut not in st["isr"]
    # The cut-off broker still believes it leads: acks=all there is never acknowledged
    # (its followers moved away and it cannot shrink its ISR), on the new leader it is.
    code, _ = await produce(c, cut, b"lost-unacked")
    assert code != 0
    assert await produce(c, st["leader"], b"acked-2") == (0, 1)
    await c.heal_network()
    await wait_until(lambda: not fenced(c, cut), what="unfenced")
    await wait_for_isr(c, T, 0, {1, 2, 3})
    await wait_until(lambda: log_records(c, cut, T, 0) == [(0, b"acked"), (1, b"acked-2")],
                     what="the returning broker truncated its unacknowledged suffix")


async def test_a_controller_cut_from_the_majority_resigns_and_the_majority_elects_another(c):
    await c.create_topic(T, 1, 3)
    old = c.controller_node_id
    rest = [b for b in (1, 2, 3) if b != old]
    loop = asyncio.get_running_loop()
    cut_at = loop.time()
    await c.partition_network([old], rest)
    await wait_until(lambda: c.controller_node_id in rest, what="a majority-side controller")
    assert (loop.time() - cut_at) * 1000 >= c.config.controller_quorum_fetch_timeout_ms
    await wait_until(lambda: fenced(c, old), what="the old controller's broker fenced")
    # Admin requests to a majority-side broker are forwarded to the new controller.
    [res] = await c.brokers[rest[0]].controller.create_topics(
        [("during", 1, 2, None, {})], validate_only=False)
    assert res.error_code == 0
    await wait_until(lambda: all("during" in c.brokers[b].metadata.topics for b in rest),
                     what="the majority side knows the new topic")
    assert "during" not in c.brokers[old].metadata.topics
    assert (await metadata(c, rest[0])).controller_id in rest
    await c.heal_network()
    await wait_until(lambda: not fenced(c, old), what="unfenced after healing")
    assert c.brokers[old].metadata.topics.get("during") is not None


async def test_links_across_a_partition_refuse_and_close_and_heal_restores_them(c):
    net = c.faults.network
    b1, b2 = c.brokers[1], c.brokers[2]
    conn = await net.connect(1, 2, b2.host, b2.port, client_id="probe")
    await c.partition_network([1], [2])
    assert conn.closed and net.cuts() == [(1, 2)]
    with pytest.raises(LinkDown):
        await net.connect(2, 1, b1.host, b1.port, client_id="probe")
    assert net.reachable(1, 3) and net.reachable(2, 3)
    with pytest.raises(ValueError, match="both sides"):
        await c.partition_network([1, 3], [3])
    await c.heal_network()
    conn = await net.connect(2, 1, b1.host, b1.port, client_id="probe")
    assert not conn.closed
    conn.close()


async def test_isolated_clients_are_disconnected_while_replication_goes_on(c):
    await c.create_topic(T, 1, 3, {"min.insync.replicas": "3"})
    leader = await c.leader_of(T, 0)
    other = next(b for b in (1, 2, 3) if b != leader)
    conn = await connect(c, other)
    c.isolate_clients(other)
    await wait_until(lambda: conn.closed, what="the client connection closed")
    fresh = await connect(c, other)             # accepted, then closed at its first request
    with pytest.raises(ConnectionClosed):
        await fresh.request(METADATA, 12)
    # other is still a follower in sync: acks=all with min.insync.replicas=3 succeeds
    assert await produce(c, leader, b"v") == (0, 0)
    c.heal_clients(other)
    md = await metadata(c, other)
    assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]


async def test_a_broker_cut_from_the_controller_forwards_admin_requests_once_healed(c):
    ctl = c.controller_node_id
    cut = next(b for b in (1, 2, 3) if b != ctl)
    await c.partition_network([cut], [ctl])
    forwarded = asyncio.ensure_future(c.brokers[cut].controller.create_topics(
        [("forwarded", 1, 1, None, {})], validate_only=False))
    await asyncio.sleep(5)
    assert not forwarded.done() and "forwarded" not in c.controller.image.topics
    await c.heal_network()
    [res] = await forwarded
    assert res.error_code == 0 and "forwarded" in c.controller.image.topics
