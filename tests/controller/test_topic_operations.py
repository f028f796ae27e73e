"""CreateTopics, DeleteTopics and AlterConfigs as pure controller operations: no cluster, no event
loop. Each test builds an image from records, runs the operation, replays the records it returns
and checks the new image and the response (Kafka's TopicsImageTest / ReplicationControlManagerTest)."""
from __future__ import annotations

import kafka.errors as Errors

from minibroker.config import ClusterConfig
from minibroker.controller import records
from minibroker.controller.image import PartitionRegistration
from minibroker.controller.placement import assign_replicas
from minibroker.controller.result import ItemResult, Result
from minibroker.controller.topics import alter_topic_configs, create_topics, delete_topics
from minibroker.ids import IdSource
from tests.controller.images import A, B, brokers, replay, topic

DEFAULTS = ClusterConfig()
BROKERS = replay(brokers(1, 2, 3))


def test_create_topic_with_assignment_and_configs():
    ids, twin = IdSource(5), IdSource(5)
    res = create_topics(BROKERS, [("a", -1, -1, {0: [1, 2], 1: [2, 3]},
                                   {"retention.ms": "1000"})], ids, DEFAULTS)
    tid = twin.topic_id()
    assert res == Result((
        records.topic("a", tid),
        records.partition_count(tid, 2, 2),
        records.topic_config("a", "retention.ms", "1000"),
        *records.partitions(tid, {0: (1, 2), 1: (2, 3)}, {1, 2, 3})),
        [ItemResult(0, None, tid, 2, 2)])
    t = replay(res.records, BROKERS).topics["a"]
    assert (t.topic_id, t.initial_partition_count, t.undeleted_partition_count) == (tid, 2, 2)
    assert dict(t.configs) == {"retention.ms": "1000"}
    assert dict(t.partitions) == {
        0: PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=0,
                                 partition_epoch=0),
        1: PartitionRegistration(replicas=(2, 3), isr=(2, 3), leader=2, leader_epoch=0,
                                 partition_epoch=0)}


def test_create_topic_placement_comes_from_the_seeded_rng_and_skips_fenced_brokers():
    image = replay(brokers(1, 2, 3, 4, fenced=(4,)))
    ids, twin = IdSource(9), IdSource(9)
    res = create_topics(image, [("a", 4, 2, None, {})], ids, DEFAULTS)
    expected = assign_replicas(image.live_brokers(), 0, 4, 2, twin.rng)
    tid = twin.topic_id()
    assert res.response == [ItemResult(0, None, tid, 4, 2)]
    t = replay(res.records, image).topics["a"]
    assert {p: reg.replicas for p, reg in t.partitions.items()} == expected
    assert all(4 not in reg.replicas and reg.leader == reg.replicas[0]
               for reg in t.partitions.values())


def test_create_topics_defaults_come_from_the_config():
    res = create_topics(BROKERS, [("a", -1, -1, None, {})], IdSource(1),
                        ClusterConfig(num_partitions=3, default_replication_factor=2))
    [item] = res.response
    assert (item.error_code, item.partitions, item.replication_factor) == (0, 3, 2)
    assert len(replay(res.records, BROKERS).topics["a"].partitions) == 3


def test_create_topics_errors_write_nothing():
    image = replay(topic("a", A, {0: (1,)}), BROKERS)
    res = create_topics(image, [
        ("a", 1, 1, None, {}),
        ("b", 0, 1, None, {}),
        ("c", 1, 0, None, {}),
        ("d", 1, 4, None, {}),
        ("e", -1, -1, {0: [1, 9]}, {}),
        ("f", -1, -1, {1: [1]}, {}),
        ("g/h", 1, 1, None, {}),
        ("i", 1, 1, None, {"retention.ms": "soon"}),
        ("j", 1, 1, None, {"no.such.config": "1"}),
    ], IdSource(1), DEFAULTS)
    assert res.records == ()
    assert [(r.error_code, r.message) for r in res.response] == [
        (Errors.TopicAlreadyExistsError.errno, "Topic 'a' already exists."),
        (Errors.InvalidPartitionsError.errno, "Number of partitions must be larger than 0."),
        (Errors.InvalidReplicationFactorError.errno, "Replication factor must be larger than 0."),
        (Errors.InvalidReplicationFactorError.errno,
         "Replication factor: 4 larger than available brokers: 3."),
        (Errors.InvalidReplicationAssignmentError.errno,
         "Invalid replica assignment for partition 0: (1, 9)"),
        (Errors.InvalidReplicationAssignmentError.errno, "Partitions must be numbered 0..n-1"),
        (Errors.InvalidTopicError.errno,
         "Topic name \"g/h\" is illegal, it contains a character other than ASCII alphanumerics, "
         "'.', '_' and '-'"),
        (Errors.InvalidConfigurationError.errno, res.response[7].message),
        (Errors.InvalidConfigurationError.errno, "Unknown topic config name: no.such.config"),
    ]
    assert "retention.ms" in res.response[7].message


def test_create_topics_a_name_twice_in_one_request_creates_it_once():
    ids, twin = IdSource(3), IdSource(3)
    res = create_topics(BROKERS, [("a", -1, -1, {0: [1]}, {}), ("a", -1, -1, {0: [2]}, {})],
                        ids, DEFAULTS)
    tid = twin.topic_id()
    assert res.response == [ItemResult(0, None, tid, 1, 1), ItemResult(
        Errors.TopicAlreadyExistsError.errno, "Topic 'a' already exists.")]
    assert replay(res.records, BROKERS).topics["a"].partitions[0].replicas == (1,)


def test_delete_topics():
    image = replay(topic("a", A, {0: (1, 2)}) + topic("b", B, {0: (2,)}), BROKERS)
    res = delete_topics(image, ["a", "zz", "a"])
    unknown = ItemResult(Errors.UnknownTopicOrPartitionError.errno,
                         "This server does not host this topic-partition.")
    assert res == Result((records.remove_topic(A),), [ItemResult(0, None, A), unknown, unknown])
    after = replay(res.records, image)
    assert sorted(after.topics) == ["b"] and dict(after.topics_by_id) == {B: "b"}
    # Images are frozen: the delta built a new one and left the old one as it was.
    assert sorted(image.topics) == ["a", "b"] and dict(image.topics_by_id) == {A: "a", B: "b"}


def test_a_topic_created_again_after_deletion_gets_its_new_id():
    image = replay(topic("a", A, {0: (1,)}), BROKERS)
    image = replay(delete_topics(image, ["a"]).records, image)
    res = create_topics(image, [("a", -1, -1, {0: [2]}, {})], IdSource(4), DEFAULTS)
    tid = IdSource(4).topic_id()
    after = replay(res.records, image)
    assert after.topics["a"].topic_id == tid and dict(after.topics_by_id) == {tid: "a"}
    assert after.topics["a"].partitions[0].replicas == (2,)


def test_alter_topic_configs_incremental_and_replace():
    image = replay(topic("a", A, {0: (1,)}, {"retention.ms": "1000", "segment.bytes": "2000000"}),
                   BROKERS)
    res = alter_topic_configs(image, "a", {"retention.ms": None, "cleanup.policy": "compact"},
                              replace=False)
    assert res == Result((records.topic_config("a", "cleanup.policy", "compact"),
                          records.topic_config("a", "retention.ms", None)), ItemResult(0))
    assert dict(replay(res.records, image).topics["a"].configs) == {
        "cleanup.policy": "compact", "segment.bytes": "2000000"}

    res = alter_topic_configs(image, "a", {"cleanup.policy": "compact"}, replace=True)
    assert dict(replay(res.records, image).topics["a"].configs) == {"cleanup.policy": "compact"}


def test_alter_topic_configs_errors_write_nothing():
    image = replay(topic("a", A, {0: (1,)}), BROKERS)
    assert alter_topic_configs(image, "b", {"retention.ms": "1"}, False) == Result(
        (), ItemResult(Errors.UnknownTopicOrPartitionError.errno, "Topic b does not exist"))
    assert alter_topic_configs(image, "a", {"no.such": "1"}, False) == Result(
        (), ItemResult(Errors.InvalidConfigurationError.errno, "Unknown topic config name: no.such"))
    res = alter_topic_configs(image, "a", {"retention.ms": "x"}, False)
    assert res.records == () and res.response.error_code == Errors.InvalidConfigurationError.errno
