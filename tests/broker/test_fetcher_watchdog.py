"""A replica fetcher cannot stop silently (issue 42): one that has not completed a fetch from its
leader for replica.lag.time.max.ms logs a WARNING naming the leader and why, and is restarted.

Here the leader never answers one of the follower's fetches (a DROP through the fault hooks: the
request hangs, the connection stays open). Before, the fetcher waited out its 30 s request
timeout with nothing above DEBUG; now it is back within the lag time and the follower catches up.
"""
from __future__ import annotations

import asyncio
import logging

import pytest
from kafka.protocol.api_key import ApiKey

from cluster_helpers import batch, connect, produce_request
from minibroker.broker.faults import DROP
from minibroker.cluster import Cluster

LAG_MS = 3000


@pytest.mark.parametrize("sockets", [False, True], ids=["memory", "tcp"])
async def test_a_fetch_the_leader_never_answers_restarts_the_fetcher_within_the_lag_time(
        caplog, sockets):
    caplog.set_level(logging.WARNING, "minibroker.fetcher")
    async with Cluster(brokers=2, replica_lag_time_max_ms=LAG_MS,
                       minibroker_inter_broker_sockets=sockets) as c:
        await c.create_topic("t", 1, 2)
        leader = await c.leader_of("t", 0)
        follower = 3 - leader
        hung = []

        def hang_one_follower_fetch(req, ctx):
            if req.replica_id == follower and ctx.node_id == leader and not hung:
                hung.append(req)
                return DROP
            return None
        c.faults.control(ApiKey.Fetch, hang_one_follower_fetch, keep=False)
        loop = asyncio.get_running_loop()
        for _ in range(100):
            if hung:
                break
            await asyncio.sleep(0.05)
        assert hung
        started = loop.time()
        conn = await connect(c, leader)
        resp = await conn.request(produce_request("t", 0, batch([b"x"], c.clock.now_ms()),
                                                  acks=1), 9)
        assert resp.responses[0].partition_responses[0].error_code == 0
        follower_log = c.brokers[follower].replica_manager.get("t", 0).log
        while follower_log.log_end_offset < 1 and loop.time() - started < 60:
            await asyncio.sleep(0.1)
        caught_up_after = loop.time() - started
        conn.close()
        assert follower_log.log_end_offset == 1
        # Within the lag time and a check interval, not the 30 s request timeout.
        assert caught_up_after < LAG_MS / 1000 * 1.25 + 2, caught_up_after
        [line] = [r.getMessage() for r in caplog.records if "replica fetcher" in r.getMessage()]
        assert f"the replica fetcher for leader {leader} has not completed a fetch" in line
        assert "waiting for a fetch response" in line and "restarting it" in line
        fetcher = c.brokers[follower].replica_manager.fetchers[leader]
        assert fetcher.restarts == 1


async def test_a_fetcher_whose_task_ended_is_restarted_with_the_reason(caplog):
    caplog.set_level(logging.WARNING, "minibroker.fetcher")
    async with Cluster(brokers=2, replica_lag_time_max_ms=LAG_MS) as c:
        await c.create_topic("t", 1, 2)
        leader = await c.leader_of("t", 0)
        follower = 3 - leader
        fetcher = c.brokers[follower].replica_manager.fetchers[leader]
        fetcher._task.cancel()            # as if its loop had ended
        await asyncio.sleep(LAG_MS / 1000)
        assert fetcher.restarts == 1 and not fetcher._task.done()
        assert any(f"leader {leader}" in r.getMessage() and "its task ended (cancelled)" in
                   r.getMessage() for r in caplog.records)
        conn = await connect(c, leader)
        resp = await conn.request(produce_request("t", 0, batch([b"x"], c.clock.now_ms()),
                                                  acks=-1), 9)
        assert resp.responses[0].partition_responses[0].error_code == 0
        conn.close()
