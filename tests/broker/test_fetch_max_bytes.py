"""The broker's fetch.max.bytes (KIP-541) caps a Fetch response below the request's max_bytes, as
in Kafka: whole batches up to the cap, the first one even when it alone is larger (KIP-74), and
min_bytes capped by it too, so a long poll does not wait for more than the broker will send."""
from __future__ import annotations

from cluster_helpers import batch, connect, fetch_request, fetched_records, produce_request
from minibroker.cluster import Cluster


async def _fetch(cap: int, batches: int, size: int, **fetch_kw) -> tuple[list[int], int, int]:
    """Offsets fetched from `batches` one-record batches of `size`-byte values under the cap, the
    records' bytes, and the cluster time the fetch took (ms)."""
    async with Cluster(brokers=1, fetch_max_bytes=cap) as c:
        await c.create_topic("t", 1, 1)
        conn = await connect(c, 1)
        for i in range(batches):
            resp = await conn.request(produce_request("t", 0, batch([bytes([i]) * size], 1000)), 9)
            assert resp.responses[0].partition_responses[0].error_code == 0
        t0 = c.clock.now_ms()
        resp = await conn.request(fetch_request("t", 0, 0, max_bytes=1 << 20, **fetch_kw), 11)
        conn.close()
        return ([o for o, _ in fetched_records(resp)], len(resp.responses[0].partitions[0].records),
                c.clock.now_ms() - t0)


async def test_the_broker_cap_is_applied_below_the_requests_max_bytes():
    offsets, size, _ = await _fetch(2048, 6, 600)     # ~670 bytes a batch
    assert offsets == [0, 1, 2] and size <= 2048


async def test_the_first_batch_is_sent_even_when_larger_than_the_cap():
    offsets, size, _ = await _fetch(1024, 2, 3000)
    assert offsets == [0] and size > 1024


async def test_min_bytes_above_the_cap_does_not_hold_a_long_poll():
    offsets, _, took_ms = await _fetch(1024, 2, 600, max_wait_ms=30_000, min_bytes=1 << 20)
    assert offsets == [0] and took_ms < 30_000          # answered at once, not at max_wait_ms
