"""A follower behind its leader fetches, in one record set, batches the leader keeps as bytes
(small ones, log/partition_log.py) beside batches it keeps as read-only views. Between brokers of
one process the memory pipe hands the views over by reference and copies the bytes with the
encoded frame (protocol/gathered.py). A record set that began or went on with such a small batch
was refused by the follower's decoder ("records run past the end of the response", or "handed over
as a different size") on every fetch: the follower never caught up, acks=all waited for it until
it left the ISR after replica.lag.time.max.ms (issue 45's ~40 s confluent-kafka stall on two of six
partitions: the two one broker led), and the watchdog's restarts fetched the same set again."""
from __future__ import annotations

import pytest

from cluster_helpers import batch, connect, log_bytes, produce_request
from minibroker.protocol.gathered import GATHER_MIN_BYTES
from test_replication import T, FetchStall, rf3_cluster, settle

SMALL = b"s" * 10                   # its batch is kept as bytes
LARGE = b"L" * GATHER_MIN_BYTES     # its batch is kept as a view, enough to be handed over


@pytest.mark.parametrize("values", [[SMALL, LARGE], [LARGE, SMALL, LARGE], [LARGE, SMALL]],
                         ids=["small-first", "small-between", "small-last"])
async def test_a_lagging_follower_fetches_small_and_large_batches_in_one_record_set(values):
    c = await rf3_cluster()                 # inter-broker links over memory pipes
    try:
        await c.create_topic(T, 1, 3)
        leader = await c.leader_of(T, 0)
        followers = {r for r in (1, 2, 3) if r != leader}
        stall = await FetchStall.engage(c, followers)
        conn = await connect(c, leader)
        for v in values:
            resp = await conn.request(produce_request(T, 0, batch([v], c.clock.now_ms()),
                                                      acks=1), 9)
            assert resp.responses[0].partition_responses[0].error_code == 0
        stall.lift()
        # The followers' next fetch carries every batch above: acks=all is answered once it has
        # (REQUEST_TIMED_OUT after timeout_ms when they cannot take it).
        resp = await conn.request(produce_request(T, 0, batch([b"last"], c.clock.now_ms()),
                                                  timeout_ms=5000), 9)
        part = resp.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, len(values))
        st = await settle(c)
        assert set(st["isr"]) == {1, 2, 3}
        assert all(log_bytes(c, f, T, 0) == log_bytes(c, leader, T, 0) for f in followers)
        conn.close()
    finally:
        await c.stop()
