"""A cluster on a data directory (Cluster(data_dir=...), serve --data-dir) started again from it,
and the metadata log compacted by snapshots (in memory too)."""
from __future__ import annotations

import os
import uuid

from cluster_helpers import (batch, connect, fetch_request, fetched_records, produce_request,
                             produce_response, wire)
from minibroker.cluster import Cluster
from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.metadata_store import MetadataStore
from minibroker.controller.records import topic


async def produce(c: Cluster, topic: str, partition: int, values: list[bytes]) -> None:
    leader = await c.leader_of(topic, partition)
    conn = await connect(c, leader)
    try:
        resp = await conn.request(produce_request(topic, partition, batch(values, 1000)), 9)
        assert resp == wire(produce_response(topic, partition, base_offset=resp.responses[0][1][0][2],
                                             log_start_offset=0), 9)
    finally:
        conn.close()


async def read_all(c: Cluster, topic: str, partition: int) -> list[bytes | None]:
    leader = await c.leader_of(topic, partition)
    conn = await connect(c, leader)
    try:
        resp = await conn.request(fetch_request(topic, partition, 0, max_bytes=1 << 20), 11)
        return [v for _, v in fetched_records(resp)]
    finally:
        conn.close()


def kip253_state(t) -> tuple:
    return (t.topic_id, t.initial_partition_count, t.undeleted_partition_count, sorted(
        (p, r.replicas, r.leader_epoch_after_creation, r.leader_epoch_before_deletion)
        for p, r in t.partitions.items()))


async def test_topics_records_and_kip253_state_come_back_from_the_data_dir(tmp_path):
    data = str(tmp_path)
    async with Cluster(brokers=3, data_dir=data) as c:
        await c.create_topic("t", 1, 3)
        await c.channel.create_partitions("t", 3, None, False)
        # KIP-253: shrinking marks partition 2 for deletion, a step still pending when stopped.
        [await produce(c, "t", i % 3, [b"v%d" % i]) for i in range(6)]
        assert (await c.channel.create_partitions("t", 2, None, False)).error_code == 0
        before = c.controller.image.topics["t"]
        assert before.undeleted_partition_count == 2 and before.partitions[2].marked_for_deletion
        ends = {n: b.replica_manager.get("t", 0).log.log_end_offset for n, b in c.brokers.items()}
    assert sorted(os.listdir(data)) == ["broker-1", "broker-2", "broker-3"]
    assert "t-0" in os.listdir(os.path.join(data, "broker-1"))
    async with Cluster(brokers=3, data_dir=data) as c:
        assert kip253_state(c.controller.image.topics["t"]) == kip253_state(before)
        await c.wait_for_leaders("t")
        assert await read_all(c, "t", 0) == [b"v0", b"v3"]
        assert {n: b.replica_manager.get("t", 0).log.log_end_offset
                for n, b in c.brokers.items()} == ends == {1: 2, 2: 2, 3: 2}
        await c.create_topic("u", 1, 1)         # a new topic gets a new id
        assert c.controller.image.topics["u"].topic_id != before.topic_id


async def test_metadata_log_is_compacted_by_snapshots_and_replays_from_them(tmp_path):
    async with Cluster(brokers=3, metadata_log_max_record_bytes_between_snapshots=2000) as c:
        held = []
        for i in range(40):
            await c.create_topic(f"t{i}", 2, 3)
            if i % 2:
                await c.channel.delete_topics([f"t{i}"])
            held.append(c.metadata_log.record_count)
        log = c.metadata_log
        # 180+ records written, never more than ~2000 bytes of them held.
        assert log.snapshots >= 3 and max(held) < 60 and len(log) > 150, (held, len(log))
        image = c.controller.image
        await c.stop_controller()
        await c.start_controller()              # replays the snapshot and the records after it
        assert c.controller.image == image
        await c.stop_broker(c.controller_node_id)       # another voter, same snapshot
        assert {n: t.topic_id for n, t in c.controller.image.topics.items()} == \
            {n: t.topic_id for n, t in image.topics.items()}
        assert c.controller.image.offset > image.offset


def test_metadata_store_keeps_the_latest_snapshot_and_cuts_a_torn_record(tmp_path):
    log = MetadataLog(MetadataStore(str(tmp_path)))
    for i in range(5):
        log.append(topic(f"t{i}", uuid.UUID(int=i)))
    again = MetadataLog(MetadataStore(str(tmp_path)))
    assert [r.name for _, r in again.read_all()] == ["t0", "t1", "t2", "t3", "t4"]
    name = next(n for n in os.listdir(tmp_path) if n.endswith(".log"))
    with open(tmp_path / name, "r+b") as f:
        f.truncate(os.path.getsize(tmp_path / name) - 3)
    torn = MetadataLog(MetadataStore(str(tmp_path)))
    assert [r.name for _, r in torn.read_all()] == ["t0", "t1", "t2", "t3"]
    torn.append(topic("t5", uuid.UUID(int=5)))
    assert [o for o, _ in MetadataLog(MetadataStore(str(tmp_path))).read_all()] == [0, 1, 2, 3, 4]


async def test_a_restart_loads_the_snapshot_on_disk_and_the_records_after_it(tmp_path):
    data = str(tmp_path)
    config = dict(brokers=1, data_dir=data, metadata_log_max_record_bytes_between_snapshots=400)
    async with Cluster(**config) as c:
        for i in range(8):
            await c.create_topic(f"t{i}", 2, 1, configs={"retention.ms": str(1000 + i)})
        await c.channel.delete_topics(["t3"])
        await c.channel.allocate_producer_ids(1000)     # a producer-id block, in the log
        ids = {n: t.topic_id for n, t in c.controller.image.topics.items()}
        pid_block = c.controller.image.next_producer_id
    meta = os.path.join(data, "broker-1", "__cluster_metadata-0")
    assert any(n.endswith(".checkpoint") for n in os.listdir(meta))
    async with Cluster(**config) as c:
        image = c.controller.image
        assert {n: t.topic_id for n, t in image.topics.items()} == ids and "t3" not in ids
        assert image.topics["t5"].configs == {"retention.ms": "1005"}
        assert image.next_producer_id == pid_block >= 1000


async def test_topic_churn_keeps_every_voters_log_bounded_and_a_restart_loads_the_snapshot(
        tmp_path):
    """Issue 42: after many creations and deletions every voter's copy of the metadata log holds
    at most the snapshot interval's bytes (plus one commit), on disk as in memory, and a restarted
    cluster loads each voter's snapshot and only the records after it.
    benchmarks/metadata_snapshots.py does 100,000 and times the restart."""
    interval = 4000
    config = dict(brokers=3, data_dir=str(tmp_path), offsets_topic_num_partitions=1,
                  metadata_log_max_record_bytes_between_snapshots=interval)
    async with Cluster(**config) as c:
        peak = {v: 0 for v in c.quorum.copies}
        for i in range(150):
            await c.create_topic(f"churn-{i}", 1, 3)
            await c.channel.delete_topics([f"churn-{i}"])
            for v, copy in c.quorum.copies.items():
                peak[v] = max(peak[v], copy.bytes_since_snapshot)
        ends = {v: len(copy) for v, copy in c.quorum.copies.items()}
        assert min(ends.values()) > 550                 # records written in all
        assert all(copy.snapshots >= 4 for copy in c.quorum.copies.values()), \
            {v: (copy.snapshots, copy.base, len(copy)) for v, copy in c.quorum.copies.items()}
        # One commit past the interval at most (a create or a delete is a few hundred bytes).
        assert max(peak.values()) < interval + 1000, peak
        for v in c.quorum.copies:
            files = os.listdir(os.path.join(str(tmp_path), f"broker-{v}", "__cluster_metadata-0"))
            assert sum(n.endswith(".checkpoint") for n in files) == 1, files
    async with Cluster(**config) as c:
        for v, copy in c.quorum.copies.items():
            assert copy.snapshot is not None and copy.base > 450
            assert copy.bytes_since_snapshot < interval + 1000
        assert not any(n.startswith("churn-") for n in c.controller.image.topics)
