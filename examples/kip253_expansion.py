"""KIP-253: a topic grows from 2 to 4 to 8 partitions while keyed records flow, and minibroker's
ordered consumer (minibroker.client.Consumer, its ordering barrier on by default) still delivers
each key's records in the order they were produced, although a key's new records now go to a new
partition: the consumer holds a new partition back until the group has read its parent partition
up to the expansion.

    python examples/kip253_expansion.py

Runs an in-process cluster; prints each expansion and a summary, and exits 1 if any key's
records arrived out of order.
"""
from __future__ import annotations

import asyncio
import sys

from minibroker import Cluster
from minibroker.client import Admin, Consumer, Producer

TOPIC = "events"
KEYS = [b"device-%02d" % i for i in range(16)]
PER_ROUND = 5                  # records per key between two expansions


async def consume(bootstrap: str, expected: int, barrier: bool) -> dict[bytes, list[int]]:
    """Read the whole topic in a new group; each key's values in delivery order."""
    consumer = Consumer(bootstrap, group_id=f"watchers-{barrier}", auto_offset_reset="earliest",
                        heartbeat_interval_ms=100, ordering_barrier=barrier)
    consumer.subscribe([TOPIC])
    seen: dict[bytes, list[int]] = {k: [] for k in KEYS}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    while sum(map(len, seen.values())) < expected and loop.time() < deadline:
        for record in await consumer.poll(0.2):
            seen[record.key].append(int(record.value))
    await consumer.close()
    return seen


async def main() -> int:
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as cluster:
        await cluster.create_topic(TOPIC, partitions=2, replication_factor=3)
        sent = 0
        async with Producer(cluster.bootstrap) as producer, Admin(cluster.bootstrap) as admin:
            for count in (2, 4, 8):
                if count > 2:
                    await admin.create_partitions({TOPIC: count})
                    print(f"{TOPIC}: expanded to {count} partitions")
                for s in range(sent // len(KEYS), sent // len(KEYS) + PER_ROUND):
                    await asyncio.gather(*[producer.send(TOPIC, b"%d" % s, key=k) for k in KEYS])
                sent += PER_ROUND * len(KEYS)
        # A key's first records sit in an old partition, its later ones in a new partition: a
        # consumer reading both at once would deliver them out of order without the barrier.
        seen = await consume(cluster.bootstrap, sent, barrier=True)
    received = sum(map(len, seen.values()))
    out_of_order = [k for k, values in seen.items() if values != sorted(values)]
    print(f"{sent} records sent across the expansions, {received} received by the ordered "
          f"consumer; keys out of order: {len(out_of_order)}")
    return 0 if received == sent and not out_of_order else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
