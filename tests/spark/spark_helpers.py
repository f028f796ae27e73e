"""Small helpers of the Spark tests (broker side, through the reference client)."""
from __future__ import annotations


def produce(bootstrap: str, topic: str, records, **producer_kw) -> list:
    """Send [(key, value, headers, timestamp_ms)] with the reference producer; the RecordMetadata."""
    import asyncio

    from minibroker.client import Producer

    async def go():
        async with Producer(bootstrap, linger_ms=2, **producer_kw) as p:
            futs = [p.send(topic, v, key=k, headers=h, timestamp_ms=ts) for k, v, h, ts in records]
            return await asyncio.gather(*futs)
    return asyncio.run(go())


def admin_call(bootstrap: str, fn):
    """asyncio.run(fn(admin)) with a fresh reference Admin."""
    import asyncio

    from minibroker.client import Admin

    async def go():
        async with Admin(bootstrap) as a:
            return await fn(a)
    return asyncio.run(go())
