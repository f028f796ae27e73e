"""list_offsets(drop_missing=True): a partition that was deleted (KIP-253 removal after draining,
or its topic) is left out of the answer at once, instead of retried until the time-out (a running
Spark query died of `KafkaTimeoutError: ListOffsets for [...partition=10]` so); the leader epoch of
each answer is reported."""
from __future__ import annotations

import asyncio
import time

import kafka.errors as Errors
import pytest

from minibroker.client import Admin, NewTopic, TopicPartition
from minibroker.client.list_offsets import LATEST, list_offsets

pytestmark = pytest.mark.timeout(60)


async def test_deleted_partitions_and_topics_are_dropped_not_waited_for(cluster):
    async with Admin(cluster.bootstrap, request_timeout_ms=20000) as admin:
        await admin.create_topics([NewTopic("lo-gone", 2, 1), NewTopic("lo-kept", 2, 1)])
        await admin.metadata.refresh(["lo-gone", "lo-kept"])
        specs = {TopicPartition(t, p): LATEST for t in ("lo-gone", "lo-kept") for p in range(3)}
        epochs: dict = {}
        t0 = time.monotonic()
        got = await list_offsets(admin.pool, admin.metadata, specs, timeout=20,
                                 drop_missing=True, leader_epochs=epochs)
        assert sorted(got) == [TopicPartition(t, p) for t in ("lo-gone", "lo-kept") for p in (0, 1)]
        assert all(e >= 0 for e in epochs.values()) and sorted(epochs) == sorted(got)
        await admin.delete_topics(["lo-gone"])
        for _ in range(100):
            await admin.metadata.refresh(["lo-gone"])
            if admin.metadata.topic("lo-gone") is None:
                break
            await asyncio.sleep(0.05)
        got = await list_offsets(admin.pool, admin.metadata, specs, timeout=20, drop_missing=True)
        assert sorted(got) == [TopicPartition("lo-kept", p) for p in (0, 1)]
        assert time.monotonic() - t0 < 10
        with pytest.raises((Errors.KafkaTimeoutError, Errors.UnknownTopicOrPartitionError)):
            await list_offsets(admin.pool, admin.metadata, {TopicPartition("lo-kept", 5): LATEST},
                               timeout=1)


async def test_a_partition_missing_from_lagging_metadata_is_looked_up_not_dropped(cluster):
    # A planner that saw partition 2 asks through a client whose metadata predates it (as a
    # broker whose UpdateMetadata lags answers): dropping it at once made a Spark micro-batch
    # skip the new partition's first records.
    async with Admin(cluster.bootstrap, request_timeout_ms=20000) as admin:
        await admin.create_topics([NewTopic("lo-grown", 2, 1)])
        await admin.metadata.refresh(["lo-grown"])
        assert 2 not in admin.metadata.topic("lo-grown").partitions
        await admin.create_partitions({"lo-grown": 3})
        got = await list_offsets(admin.pool, admin.metadata, {TopicPartition("lo-grown", 2): LATEST},
                                 timeout=20, drop_missing=True)
        assert got == {TopicPartition("lo-grown", 2): (0, got[TopicPartition("lo-grown", 2)][1])}
