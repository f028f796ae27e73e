"""A runnable KIP-878 example: `python -m minibroker.client.streams.example`.

Starts a 3-broker cluster in this process, runs a two-sub-topology count-per-key app on a
4-partition `clicks` topic, expands `clicks-per-user` then `clicks` to 8 partitions while it runs,
and prints what the app did: its internal topics follow, the callback runs once, the metrics.
"""
from __future__ import annotations

import asyncio
import logging

from minibroker.client import Admin, Producer
from minibroker.client.streams import KafkaStreams, LinearHashingPartitioner, StreamsBuilder
from minibroker.cluster import Cluster


def build() -> StreamsBuilder:
    b = StreamsBuilder()
    (b.stream("clicks")
      .map(lambda user, page: (user, page))           # a sub-topology ends at the repartition
      .repartition("by-user")
      .aggregate("click-counts", lambda: b"0", lambda user, page, n: b"%d" % (int(n) + 1))
      .to("clicks-per-user"))
    return b


async def main() -> None:
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as cluster:
        await cluster.create_topic("clicks", 4)
        await cluster.create_topic("clicks-per-user", 4)
        stable = asyncio.Event()

        def expanded(old: int, new: int) -> None:
            print(f"on_partition_expansion({old}, {new}): safe to send new keys now")
            stable.set()

        app = KafkaStreams(build(), cluster.bootstrap, {
            "application.id": "clicks-app",
            "partition.autoscaling.enabled": True,
            "metadata.max.age.ms": 500,                       # notice the new partitions sooner
            "minibroker.partition.autoscaling.followup.ms": 1000,
        }, partitioner=LinearHashingPartitioner(on_expansion=expanded))
        await app.start()
        print(app.topology.describe())
        async with Producer(cluster.bootstrap) as producer, Admin(cluster.bootstrap) as admin:
            for i in range(200):
                producer.send("clicks", b"/page/%d" % (i % 7), key=b"user-%d" % (i % 20))
            await producer.flush()
            await asyncio.sleep(2)
            show(app, "before")
            await admin.create_partitions({"clicks-per-user": 8})      # downstream first
            await admin.create_partitions({"clicks": 8})
            await asyncio.wait_for(stable.wait(), 60)
            topics = await admin.describe_topics(app.topology.internal_topics)
            print({t: md.partition_count for t, md in topics.items()})
            show(app, "after")
        await app.close()


def show(app: KafkaStreams, when: str) -> None:
    for name, value in app.metrics:
        print(f"  {when}: {name.name} {dict(name.tags)} = {value}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)      # not the shutdown's closed connections
    asyncio.run(main())
