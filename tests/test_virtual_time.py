"""VirtualTimeLoop: timers jump, real loopback sockets still work, deadlocks raise, threads are
waited for in real time; and tests/conftest.py puts async tests on it unless marked real_time."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest
from kafka.protocol.consumer import FetchResponse

from cluster_helpers import (batch, connect, fetch_request, produce_request, produce_response,
                             wire)
from minibroker.cluster import Cluster
from minibroker.testing.virtual_time import (RealTimeLimitExceeded, VirtualTimeDeadlock,
                                             VirtualTimeLoop)


async def test_async_tests_run_on_virtual_time(virtual_time):
    assert type(asyncio.get_running_loop()) is VirtualTimeLoop


async def test_one_hour_sleep_is_instant(virtual_time):
    t0, real0 = virtual_time.time(), time.monotonic()
    await asyncio.sleep(3600)
    assert virtual_time.time() - t0 == pytest.approx(3600)
    assert time.monotonic() - real0 < 1.0


async def test_timeouts_fire_in_virtual_time(virtual_time):
    t0 = virtual_time.time()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(300):
            await asyncio.get_running_loop().create_future()
    assert virtual_time.time() - t0 == pytest.approx(300)


def test_true_deadlock_raises():
    loop = VirtualTimeLoop()
    try:
        with pytest.raises(VirtualTimeDeadlock):
            loop.run_until_complete(loop.create_future())
    finally:
        loop.close()


def test_livelock_raises_after_the_real_time_limit():
    """Callbacks that spin forever keep virtual time still; the loop's real-time limit ends it."""
    real0 = time.monotonic()
    loop = VirtualTimeLoop(real_time_limit=0.2)

    async def spin():
        while True:
            await asyncio.sleep(0)
    task = loop.create_task(spin())
    try:
        with pytest.raises(RealTimeLimitExceeded, match="virtual clock at 0.000 s"):
            loop.run_until_complete(task)
        assert 0.2 <= time.monotonic() - real0 < 5
        task.cancel()                       # the limit fires once: cleanup still runs
        with pytest.raises(asyncio.CancelledError):
            loop.run_until_complete(task)
    finally:
        loop.close()


async def test_executor_threads_are_waited_for_in_real_time(virtual_time):
    """A 10 s virtual timeout must not jump past a thread that answers after 0.1 real s."""
    loop = asyncio.get_running_loop()
    result = await asyncio.wait_for(loop.run_in_executor(None, time.sleep, 0.1), timeout=10)
    assert result is None
    assert loop._executor_jobs == 0


async def test_host_names_resolve_through_the_executor(virtual_time):
    """getaddrinfo runs in a thread; the connect timeout must not fire while it does."""
    async with Cluster(brokers=1) as c:
        port = c.brokers[1].port
        reader, writer = await asyncio.wait_for(asyncio.open_connection("localhost", port), 5)
        writer.close()
        await writer.wait_closed()


@pytest.mark.real_time
async def test_real_time_mark_selects_the_default_loop():
    loop = asyncio.get_running_loop()
    assert not isinstance(loop, VirtualTimeLoop)
    done = loop.create_future()
    threading.Thread(target=lambda: loop.call_soon_threadsafe(done.set_result, 7)).start()
    assert await asyncio.wait_for(done, 5) == 7


async def test_fetch_long_poll_of_60_s_returns_after_60_virtual_seconds(virtual_time):
    """A consumer long-poll with max_wait_ms=60000 against real sockets: instant in real time."""
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 1, 3)
        leader = await c.leader_of("t", 0)
        conn = await connect(c, leader)
        now = c.clock.now_ms()
        resp = await conn.request(produce_request("t", 0, batch([b"v"], now)), 9)
        assert resp == wire(produce_response("t", 0, base_offset=0, log_start_offset=0), 9)

        real0, t0 = time.monotonic(), virtual_time.time()
        resp = await conn.request(fetch_request("t", 0, 1, max_wait_ms=60_000), 12, timeout=120)
        elapsed = virtual_time.time() - t0
        assert 60.0 <= elapsed < 60.1, elapsed
        assert time.monotonic() - real0 < 5.0
        P = FetchResponse.FetchableTopicResponse.PartitionData
        assert resp == wire(FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
            FetchResponse.FetchableTopicResponse(topic="t", partitions=[P(
                partition_index=0, error_code=0, high_watermark=1, last_stable_offset=1,
                log_start_offset=0, diverging_epoch=None, current_leader=None, snapshot_id=None,
                aborted_transactions=None, preferred_read_replica=-1, records=b"")])]), 12)
        conn.close()


async def test_cluster_clock_follows_virtual_time(virtual_time):
    async with Cluster(brokers=1) as c:
        before = c.clock.now_ms()
        await asyncio.sleep(3600)
        assert c.clock.now_ms() - before == 3_600_000
