"""A partition leader the cluster still names but the client cannot reach: producer and consumer
refresh metadata at most about once per retry backoff, and carry on once it is reachable again.
Found by minibroker.testing.Simulation (clients cut off from one broker): each refresh's answer,
naming the same leader, woke the client, which started the next refresh at once, so virtual time
never moved on (in real time: a busy loop of Metadata requests).

The cut is on the client's side, as a firewall would make it: its connection to the leader is
closed and the leader's address answers every new connection with a refusal."""
from __future__ import annotations

import asyncio
import socket

import pytest

from minibroker.client import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.timeout(30)

CUT_S = 2.0
MAX_REFRESHES = int(CUT_S / 0.05) + 10     # one per 50 ms retry backoff, and some slack


def count_refreshes(metadata) -> list[int]:
    """Counts `metadata`'s Metadata requests; past a spin's worth it parks the refresh loop, so
    a client without the backoff fails this test's count instead of livelocking virtual time."""
    calls = [0]
    fetch = metadata._fetch

    async def counting(names):
        calls[0] += 1
        if calls[0] > 10 * MAX_REFRESHES:
            await asyncio.sleep(3600)
        return await fetch(names)
    metadata._fetch = counting
    return calls


def refused_address() -> tuple[str, int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    addr = s.getsockname()
    s.close()                               # nothing listens there now: connections are refused
    return addr


def cut(pool, node: int) -> None:
    address, dead = pool._address, refused_address()
    pool._address = lambda n: dead if n == node else address(n)
    pool.close_node(node, "cut off")


def heal(pool) -> None:
    del pool._address                       # the class's method again


async def test_producer_backs_off_while_its_leader_is_unreachable(cluster):
    await cluster.create_topic("cut", 1, 3)
    leader = await cluster.leader_of("cut", 0)
    async with Producer(cluster.bootstrap, retry_backoff_ms=50, linger_ms=0) as p:
        assert (await p.send("cut", b"before")).offset == 0
        calls = count_refreshes(p.metadata)
        cut(p.pool, leader)
        during = p.send("cut", b"during")
        await asyncio.sleep(CUT_S)
        assert not during.done() and calls[0] <= MAX_REFRESHES, calls[0]
        heal(p.pool)
        assert (await asyncio.wait_for(during, 10)).offset == 1


async def test_consumer_backs_off_while_its_leader_is_unreachable(cluster):
    await cluster.create_topic("cut", 1, 3)
    leader = await cluster.leader_of("cut", 0)
    consumer = Consumer(cluster.bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100,
                        retry_backoff_ms=50)
    consumer.assign([TopicPartition("cut", 0)])
    try:
        async with Producer(cluster.bootstrap) as p:
            await p.send("cut", b"v0")
            assert [r.value for r in await poll_until(consumer, 1)] == [b"v0"]
            calls = count_refreshes(consumer.metadata)
            cut(consumer.pool, leader)
            assert await consumer.poll(CUT_S) == []
            assert calls[0] <= MAX_REFRESHES, calls[0]
            heal(consumer.pool)
            await p.send("cut", b"v1")
            assert [r.value for r in await poll_until(consumer, 1)] == [b"v1"]
    finally:
        await consumer.close()


async def poll_until(consumer: Consumer, count: int) -> list:
    got: list = []
    for _ in range(40):
        got += await consumer.poll(0.5)
        if len(got) >= count:
            break
    return got
