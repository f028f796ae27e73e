"""Admin client against the in-process cluster."""
from __future__ import annotations

import asyncio

import kafka.errors as Errors
import pytest

from minibroker.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from minibroker.client.admin import TOPIC

pytestmark = pytest.mark.timeout(30)


async def eventually(fn, expect, timeout=5.0):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    got = await fn()
    while got != expect and loop.time() < end:
        await asyncio.sleep(0.05)
        got = await fn()
    return got


async def test_topics_partitions_configs(cluster):
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topics([NewTopic("a1", 2, 3, {"retention.ms": "7200000"})])
        with pytest.raises(Errors.TopicAlreadyExistsError):
            await admin.create_topics([NewTopic("a1", 2, 3)])
        assert (await admin.list_topics()).get("a1") == 2
        configs = await admin.describe_configs(topics=["a1"])
        assert configs[(TOPIC, "a1")]["retention.ms"] == "7200000"
        await admin.alter_configs({(TOPIC, "a1"): {"retention.ms": "1000"}})
        configs = await admin.describe_configs(topics=["a1"])
        assert configs[(TOPIC, "a1")]["retention.ms"] == "1000"

        await admin.create_partitions({"a1": 4})

        async def count():
            return (await admin.list_topics()).get("a1")
        assert await eventually(count, 4) == 4
        md = (await admin.describe_topics(["a1"]))["a1"]
        assert (md.initial_partition_count, md.undeleted_partition_count) == (2, 4)

        await admin.delete_topics(["a1"])

        async def exists():
            return "a1" in await admin.list_topics()
        assert await eventually(exists, False) is False


async def test_offsets_records_groups_cluster(cluster):
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topics([NewTopic("a2", 1, 1)])
        await cluster.wait_for_leaders("a2")
        async with Producer(cluster.bootstrap) as producer:
            await asyncio.gather(*[producer.send("a2", b"%d" % i) for i in range(10)])
        tp = TopicPartition("a2", 0)
        assert (await admin.list_offsets({tp: "earliest"}))[tp][0] == 0
        assert (await admin.list_offsets({tp: "latest"}))[tp][0] == 10
        assert (await admin.delete_records({tp: 4}))[tp] == 4
        assert (await admin.list_offsets({tp: "earliest"}))[tp][0] == 4

        consumer = Consumer(cluster.bootstrap, group_id="ag", heartbeat_interval_ms=100,
                            auto_offset_reset="earliest", fetch_max_wait_ms=50)
        consumer.subscribe(["a2"])
        got = []
        loop = asyncio.get_running_loop()
        end = loop.time() + 5
        while len(got) < 6 and loop.time() < end:
            got += await consumer.poll(0.2)
        assert [r.offset for r in got] == list(range(4, 10))
        assert "ag" in await admin.list_groups()
        desc = (await admin.describe_groups(["ag"]))["ag"]
        assert desc["state"] == "Stable"
        assert [m["assignment"] for m in desc["members"]] == [{"a2": [0]}]
        await consumer.close()
        await admin.delete_groups(["ag"])
        assert "ag" not in await admin.list_groups()

        info = await admin.describe_cluster()
        assert sorted(info["brokers"]) == [1, 2, 3]
