"""What a new controller does on failover, without a cluster: every operation's records go through
the metadata log's encoding, and replaying the whole log in one delta builds the same image as
applying each operation's records as it committed them (Kafka's MetadataLoader vs the active
controller's image)."""
from __future__ import annotations

from minibroker.config import ClusterConfig
from minibroker.controller import brokers, partition_count, partitions, reassignment, topics
from minibroker.controller.delta import MetadataDelta
from minibroker.controller.image import MetadataImage
from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.result import Result
from minibroker.ids import IdSource


def test_replaying_the_log_builds_the_image_the_operations_built():
    log, ids = MetadataLog(), IdSource(11)
    image = MetadataImage()

    def commit(result):
        nonlocal image
        delta = MetadataDelta(image)
        for r in result.records:
            delta.replay(r, log.append(r))
        image = delta.apply()
        return result.response

    for b in (1, 2, 3, 4):
        assert commit(brokers.register_broker(image, b, "127.0.0.1", 9000 + b, f"r{b % 2}")) >= 0
    assert [r.error_code for r in commit(topics.create_topics(
        image, [("a", 2, 2, None, {"retention.ms": "5000"}), ("b", 3, 3, None, {})], ids,
        ClusterConfig()))] == [0, 0]
    assert commit(partition_count.change_partition_count(image, "a", 4, None, ids)).error_code == 0
    assert commit(partition_count.change_partition_count(image, "a", 3, None, ids)).error_code == 0
    assert commit(partition_count.remove_partition(image, "a", 3)) is True
    before = image.topics["b"].partitions[0]
    joining = next(b for b in (1, 2, 3, 4) if b not in before.replicas)
    target = [joining] + list(before.replicas[1:])              # the leader leaves
    accepted = commit(reassignment.plan(image, [("b", 0, target)], 1000, 60_000))
    assert dict(image.moving) == {(image.topics["b"].topic_id, 0): accepted.request_id}
    p = image.topics["b"].partitions[0]
    assert commit(partitions.alter_partition(image, p.leader, "b", 0, p.leader_epoch,
                                             p.partition_epoch, p.isr + (joining,))) == 0
    commit(Result(tuple(reassignment.completion_records(image)), None))
    assert image.reassignments[accepted.request_id].complete
    assert image.topics["b"].partitions[0].leader in target
    assert commit(topics.alter_topic_configs(image, "a", {"retention.ms": None},
                                             False)).error_code == 0
    commit(brokers.fence_broker(image, 2))
    assert commit(brokers.allocate_producer_ids(image, 1, 1000)) == (1000, 1000)
    assert [r.error_code for r in commit(topics.delete_topics(image, ["b"]))] == [0]

    replayed = MetadataDelta(MetadataImage())
    for offset, record in log.read_all():
        replayed.replay(record, offset)
    assert replayed.apply() == image
    assert image.offset == len(log) - 1
