"""KIP-253 controller procedures: expansion, deletion by marking, resume after a controller stop,
removal of drained partitions — checked on the controller image and on every broker's view."""
from __future__ import annotations

import asyncio

from kafka.errors import InvalidPartitionsError, RequestTimedOutError

from minibroker.cluster import Cluster
from tests.cluster_helpers import set_partition_count, settle_partition_count


async def test_expansion_bumps_epochs_and_records_after_creation():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 2, 3)
        ctl = c.controller
        res = await ctl.create_partitions("t", 5, None, False)
        assert res.error_code == 0
        t = ctl.image.topics["t"]
        assert (t.initial_partition_count, t.undeleted_partition_count) == (2, 5)
        assert [t.partitions[p].leader_epoch for p in range(5)] == [1, 1, 0, 0, 0]
        for p in (2, 3, 4):
            assert t.partitions[p].leader_epoch_after_creation == ((0, 0), (1, 0))
        assert t.pending_after_creation == ()
        await settle_partition_count(c, "t", 5)
        for b in c.brokers.values():
            info = b.metadata.topics["t"]
            assert (info.initial_partition_count, info.undeleted_partition_count) == (2, 5)
            assert info.partitions[3].leader_epoch_after_creation == ((0, 0), (1, 0))
            # Leaders enforce the count they were told with the bumped epoch.
            for pid in (0, 1):
                p = b.replica_manager.get("t", pid)
                if p is not None:
                    assert p.undeleted_partition_count == 5 and p.leader_epoch == 1


async def test_deletion_marks_partitions_and_refuses_expansion_until_removed():
    async with Cluster(brokers=3, partition_deletion_check_interval_ms=50) as c:
        await c.create_topic("t", 2, 3)
        ctl = c.controller
        assert (await ctl.create_partitions("t", 4, None, False)).error_code == 0
        res = await ctl.create_partitions("t", 1, None, False)
        assert res.error_code == InvalidPartitionsError.errno      # below the initial count
        assert (await c.controller.create_partitions("t", 2, None, False)).error_code == 0
        t = c.controller.image.topics["t"]
        assert t.undeleted_partition_count == 2
        assert [t.partitions[p].leader_epoch for p in range(4)] == [2, 2, 0, 0]
        for p in (2, 3):
            assert t.partitions[p].leader_epoch_before_deletion == ((0, 1), (1, 1))
        res = await c.controller.create_partitions("t", 6, None, False)
        assert res.error_code == InvalidPartitionsError.errno
        assert "marked for deletion" in res.message
        # The marked partitions are empty: the removal task takes them out of the topic.
        await settle_partition_count(c, "t", 2)
        assert sorted(c.controller.image.topics["t"].partitions) == [0, 1]
        for b in c.brokers.values():
            assert b.replica_manager.get("t", 2) is None and b.replica_manager.get("t", 3) is None
        assert (await c.controller.create_partitions("t", 3, None, False)).error_code == 0


async def test_marked_partition_with_data_stays_until_drained():
    from minibroker.log.batch import build_batch
    async with Cluster(brokers=3, partition_deletion_check_interval_ms=50) as c:
        await c.create_topic("t", 1, 3)
        await set_partition_count(c, "t", 2)
        leader = c.brokers[await c.leader_of("t", 1)]
        p = leader.replica_manager.get("t", 1)
        p.log.append_as_leader(build_batch([(b"k", b"v", [])]), p.leader_epoch)
        p.maybe_increment_high_watermark()
        assert (await c.controller.create_partitions("t", 1, None, False)).error_code == 0
        await asyncio.sleep(0.3)
        assert 1 in c.controller.image.topics["t"].partitions       # not drained yet
        for _ in range(200):                                          # replicated to the ISR
            if p.high_watermark == 1:
                break
            await asyncio.sleep(0.01)
        p.log.delete_records_before(p.high_watermark)
        await settle_partition_count(c, "t", 1)
        assert sorted(c.controller.image.topics["t"].partitions) == [0]


async def test_controller_stopped_mid_expansion_next_controller_completes_it():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 2, 3)
        first = c.controller
        c.faults.enable("controller.partition_count.step1")
        res = await first.create_partitions("t", 4, None, False)
        assert res.error_code == RequestTimedOutError.errno
        c.faults.disable("controller.partition_count.step1")
        ctl = await c.active_controller()
        for _ in range(200):
            if c.controller is not first and c.controller is not None:
                break
            await asyncio.sleep(0.01)
        ctl = await c.active_controller()
        assert ctl is not first and ctl.controller_epoch == first.controller_epoch + 1
        t = ctl.image.topics["t"]
        assert sorted(t.partitions) == [0, 1, 2, 3]
        assert [t.partitions[p].leader_epoch for p in range(4)] == [1, 1, 0, 0]
        assert t.partitions[2].leader_epoch_after_creation == ((0, 0), (1, 0))
        await settle_partition_count(c, "t", 4)


async def test_controller_stopped_mid_deletion_next_controller_completes_it():
    async with Cluster(brokers=3) as c:
        await c.create_topic("t", 2, 3)
        assert (await c.controller.create_partitions("t", 4, None, False)).error_code == 0
        first = c.controller
        c.faults.enable("controller.partition_count.step1")
        res = await first.create_partitions("t", 2, None, False)
        assert res.error_code == RequestTimedOutError.errno
        c.faults.disable("controller.partition_count.step1")
        for _ in range(200):
            if c.controller is not first and c.controller is not None:
                break
            await asyncio.sleep(0.01)
        t = (await c.active_controller()).image.topics["t"]
        assert t.undeleted_partition_count == 2
        assert [t.partitions[p].marked_for_deletion for p in sorted(t.partitions)][:2] == \
            [False, False]
        assert all(t.partitions[p].leader_epoch_before_deletion == ((0, 1), (1, 1))
                   for p in (2, 3) if p in t.partitions)


async def test_ordered_delivery_off_skips_epoch_steps_and_refuses_shrink():
    async with Cluster(brokers=1) as c:
        await c.create_topic("t", 2, 1, {"enable.ordered.delivery": "false"})
        ctl = c.controller
        assert (await ctl.create_partitions("t", 3, None, False)).error_code == 0
        t = ctl.image.topics["t"]
        assert [t.partitions[p].leader_epoch for p in range(3)] == [0, 0, 0]
        assert t.partitions[2].leader_epoch_after_creation == ()
        res = await ctl.create_partitions("t", 2, None, False)
        assert res.error_code == InvalidPartitionsError.errno
