"""KIP-253 N -> 2N -> N -> 2N: a partition index removed and created again starts one leader epoch
above its last incarnation, so a reader still holding the old incarnation's position is fenced
and OffsetForLeaderEpoch shows it the truncation (end offset 0), as Kafka's clients expect, rather
than reading the new log from the old offset and silently skipping its first records."""
from __future__ import annotations

import asyncio

from kafka.errors import FencedLeaderEpochError
from kafka.protocol.consumer import FetchRequest, OffsetForLeaderEpochRequest

from minibroker.cluster import Cluster
from minibroker.log.batch import build_batch
from minibroker.network.client import KafkaClientConnection
from tests.cluster_helpers import set_partition_count, settle_partition_count

T, P = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition
OE_T = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
OE_P = OE_T.OffsetForLeaderPartition


async def _append(c: Cluster, topic: str, partition: int, n: int) -> None:
    p = c.brokers[await c.leader_of(topic, partition)].replica_manager.get(topic, partition)
    for i in range(n):
        p.log.append_as_leader(build_batch([(b"k", b"v%d" % i, [])]), p.leader_epoch)
    for _ in range(300):                       # replicated to the ISR
        p.maybe_increment_high_watermark()
        if p.high_watermark == p.log.log_end_offset:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("high watermark did not reach the log end")


def _fetch(partition: int, current_leader_epoch: int, offset: int) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[T(topic="t", partitions=[P(
            partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20)])])


async def test_recreated_index_fences_the_old_incarnation():
    async with Cluster(brokers=3, partition_deletion_check_interval_ms=50) as c:
        await c.create_topic("t", 1, 3)
        ctl = c.controller
        await set_partition_count(c, "t", 2)
        await _append(c, "t", 1, 3)
        old_epoch = (await c.active_controller()).image.topics["t"].partitions[1].leader_epoch
        assert (await ctl.create_partitions("t", 1, None, False)).error_code == 0
        leader = c.brokers[await c.leader_of("t", 1)]
        p = leader.replica_manager.get("t", 1)
        p.log.delete_records_before(p.high_watermark)             # drained: the task removes it
        await settle_partition_count(c, "t", 1)
        image = (await c.active_controller()).image
        assert image.topics["t"].removed_leader_epochs == ((1, old_epoch),)

        await set_partition_count(c, "t", 2)
        new_epoch = (await c.active_controller()).image.topics["t"].partitions[1].leader_epoch
        assert new_epoch == old_epoch + 1
        await _append(c, "t", 1, 5)
        b = c.brokers[await c.leader_of("t", 1)]
        assert b.replica_manager.get("t", 1).leader_epoch == new_epoch
        conn = await KafkaClientConnection.connect(b.host, b.port)
        try:
            # A reader of the old incarnation, at its end (offset 3), is fenced (with empty
            # records: librdkafka rejects a null) ...
            resp = await conn.request(_fetch(1, old_epoch, 3), 12)
            part = resp.responses[0].partitions[0]
            assert (part.error_code, part.records) == (FencedLeaderEpochError.errno, b"")
            # ... and its epoch ends at offset 0 of the new log: a truncation below offset 3.
            resp = await conn.request(OffsetForLeaderEpochRequest(replica_id=-1, topics=[OE_T(
                topic="t", partitions=[OE_P(partition=1, current_leader_epoch=new_epoch,
                                            leader_epoch=old_epoch)])]), 4)
            r = resp.topics[0].partitions[0]
            assert (r.error_code, r.leader_epoch, r.end_offset) == (0, old_epoch, 0)
            # With the new epoch the whole new log is read from its start.
            resp = await conn.request(_fetch(1, new_epoch, 0), 12)
            part = resp.responses[0].partitions[0]
            assert (part.error_code, part.high_watermark) == (0, 5)
        finally:
            conn.close()


async def test_removed_epochs_survive_controller_failover():
    async with Cluster(brokers=3, partition_deletion_check_interval_ms=50) as c:
        await c.create_topic("t", 1, 3)
        await set_partition_count(c, "t", 2)
        await set_partition_count(c, "t", 1)
        removed = (await c.active_controller()).image.topics["t"].removed_leader_epochs
        assert removed == ((1, 0),)
        await c.stop_controller()                    # the next one replays the metadata log
        await c.start_controller()
        assert (await c.active_controller()).image.topics["t"].removed_leader_epochs == removed
        await set_partition_count(c, "t", 2)
        assert (await c.active_controller()).image.topics["t"].partitions[1].leader_epoch == 1
