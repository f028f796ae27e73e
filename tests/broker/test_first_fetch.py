"""A new partition's first acks=all write does not wait out the followers' long polls, on virtual
time: the followers' fetches to its leader were already waiting (replica.fetch.wait.max.ms) when
the partition appeared (minibroker.broker.first_fetch)."""
from __future__ import annotations

import asyncio

from cluster_helpers import batch, connect, produce_request, produce_response, wire
from minibroker.cluster import Cluster

WAIT_MAX_MS = 500


async def test_first_acks_all_write_to_a_new_partition_is_not_held_by_a_long_poll():
    c = Cluster(brokers=3, replica_fetch_wait_max_ms=WAIT_MAX_MS)
    await c.start()
    try:
        loop = asyncio.get_running_loop()
        # Every broker leads one partition of "warm", so each follower has a fetcher long-polling
        # each leader (nothing to fetch) when "fresh" is created.
        await c.create_topic("warm", 3, 3)
        assert sorted([await c.leader_of("warm", p) for p in range(3)]) == [1, 2, 3]
        for offset_ms in (100, 250, 400):       # anywhere inside the followers' polls
            await asyncio.sleep(WAIT_MAX_MS * 2 / 1000)
            await asyncio.sleep(offset_ms / 1000)
            topic = f"fresh-{offset_ms}"
            await c.create_topic(topic, 3, 3)
            for p in range(3):
                conn = await connect(c, await c.leader_of(topic, p))
                start = loop.time()
                resp = await conn.request(produce_request(topic, p, batch([b"v"], 0)), 9)
                took_ms = (loop.time() - start) * 1000
                conn.close()
                assert resp == wire(produce_response(topic, p, base_offset=0, log_start_offset=0),
                                    9)
                # Two fetch round trips; a waited-out poll would be up to WAIT_MAX_MS.
                assert took_ms < 50, f"{topic}-{p}: first acks=all write took {took_ms:.0f} ms"
    finally:
        await c.stop()
