"""Broker registration and fencing, AlterPartition, leader election and producer-id blocks as
pure controller operations: images built from records, no cluster, no event loop."""
from __future__ import annotations

import kafka.errors as Errors

from minibroker.controller import records
from minibroker.controller.brokers import (allocate_producer_ids, fence_broker, register_broker,
                                          unfence_broker)
from minibroker.controller.image import BrokerRegistration
from minibroker.controller.partitions import alter_partition, elect_leader
from minibroker.controller.result import Result
from tests.controller.images import A, brokers, replay, topic


def _image():
    return replay(brokers(1, 2, 3) + topic("a", A, {0: (1, 2), 1: (2, 3), 2: (3,)}))


def test_register_a_new_broker_its_epoch_is_its_records_offset():
    image = _image()
    res = register_broker(image, 4, "h", 9004, "r1")
    epoch = image.offset + 1
    assert res == Result((records.register_broker(4, epoch, "h", 9004, "r1"),
                          records.unfence_broker(4, epoch)), epoch)
    assert replay(res.records, image).brokers[4] == BrokerRegistration(4, epoch, "h", 9004, "r1",
                                                                        False)


def test_fencing_moves_leadership_and_shrinks_isrs_and_the_broker_gets_it_back_on_return():
    image = _image()
    res = fence_broker(image, 3)
    assert res == Result((
        records.fence_broker(3, 103),
        records.partition_change(A, 1, isr=[2]),                 # 3 leaves the ISR
        records.partition_change(A, 2, leader=-1, isr=[3])), None)   # alone: no leader left
    fenced = replay(res.records, image)
    assert fenced.brokers[3].fenced and [b.broker_id for b in fenced.live_brokers()] == [1, 2]
    assert fenced.topics["a"].partitions[2].leader == -1
    assert fence_broker(fenced, 3) == Result((), None) == fence_broker(fenced, 9)

    back = register_broker(fenced, 3, "127.0.0.1", 9003, None)
    assert back.response == 104                                  # a returning broker: epoch + 1
    assert back.records[2:] == (records.partition_change(A, 2, leader=3),)
    p = replay(back.records, fenced).topics["a"].partitions[2]
    assert (p.leader, p.leader_epoch, p.isr) == (3, 2, (3,))


def test_a_heartbeat_unfences_a_fenced_broker_with_its_epoch_and_refuses_another_epoch():
    """serve --processes: a broker fenced for a lost session (SIGSTOP) is unfenced by its next
    heartbeat, keeping its epoch (KRaft's UnfenceBrokerRecord); leaderless partitions it is in
    sync for get it back, as on a registration."""
    fenced = replay(fence_broker(_image(), 3).records, _image())
    assert unfence_broker(fenced, 3, 104) == Result((), False)      # not its epoch: register
    assert unfence_broker(fenced, 9, 1) == Result((), False)
    res = unfence_broker(fenced, 3, 103)
    assert res == Result((records.unfence_broker(3, 103),
                          records.partition_change(A, 2, leader=3)), True)
    back = replay(res.records, fenced)
    assert not back.brokers[3].fenced and back.brokers[3].broker_epoch == 103
    assert back.topics["a"].partitions[2].leader == 3
    assert unfence_broker(back, 3, 103) == Result((), True)         # unfenced: nothing to write


def test_fencing_a_leader_elects_the_next_in_sync_replica():
    image = _image()
    res = fence_broker(image, 1)
    assert res.records[1:] == (records.partition_change(A, 0, leader=2, isr=[2]),)
    p = replay(res.records, image).topics["a"].partitions[0]
    assert (p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (2, 1, (2,), 1)


def test_alter_partition():
    image = _image()
    shrink = alter_partition(image, 1, "a", 0, 0, 0, (1,))
    assert shrink == Result((records.partition_change(A, 0, isr=[1]),), 0)
    after = replay(shrink.records, image)
    p = after.topics["a"].partitions[0]
    assert (p.isr, p.leader_epoch, p.partition_epoch) == ((1,), 0, 1)
    # A stale partition epoch, an old leader epoch, a follower, an unknown partition:
    assert alter_partition(after, 1, "a", 0, 0, 0, (1, 2)) == \
        Result((), Errors.InvalidUpdateVersionError.errno)
    assert alter_partition(after, 1, "a", 0, 5, 1, (1, 2)) == \
        Result((), Errors.FencedLeaderEpochError.errno)
    assert alter_partition(after, 2, "a", 0, 0, 1, (1, 2)) == \
        Result((), Errors.NotLeaderForPartitionError.errno)
    assert alter_partition(after, 1, "a", 9, 0, 0, (1,)) == \
        Result((), Errors.UnknownTopicOrPartitionError.errno)
    # The same ISR, or one without the leader, writes nothing; fenced brokers are left out.
    assert alter_partition(after, 1, "a", 0, 0, 1, (1,)) == Result((), 0)
    assert alter_partition(after, 1, "a", 0, 0, 1, (2,)) == Result((), 0)
    fenced = replay(fence_broker(image, 2).records[:1], image)
    assert alter_partition(fenced, 1, "a", 0, 0, 0, (1, 2)) == \
        Result((records.partition_change(A, 0, isr=[1]),), 0)


def test_elect_leader():
    image = _image()
    res = elect_leader(image, "a", 0, 2)
    assert res == Result((records.partition_change(A, 0, leader=2),), 2)
    p = replay(res.records, image).topics["a"].partitions[0]
    assert (p.leader, p.leader_epoch) == (2, 1)
    assert elect_leader(image, "a", 0, 3) == Result((), 1)          # 3 is not a replica
    assert elect_leader(image, "a", 0, None) == Result((), 1)       # already the first one


def test_allocate_producer_ids_in_blocks():
    image = _image()
    res = allocate_producer_ids(image, 1, 1000)
    assert res == Result((records.producer_ids(1, 2000),), (1000, 1000))
    image = replay(res.records, image)
    assert allocate_producer_ids(image, 1, 10).response == (2000, 10)
