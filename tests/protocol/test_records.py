"""Round trips of every record in schemas/records at every version, and their framing."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.schemas.fields.codecs import (
    Boolean, Bytes, Float64, Int8, Int16, Int32, Int64, String, UnsignedInt16, UUID)

from minibroker.protocol import records as r

from schema_samples import build


def _scalar(codec, n: int):
    if codec is Int8:
        return 5 + n % 50
    if codec is Int16:
        return 200 + n
    if codec is UnsignedInt16:
        return 50000 + n
    if codec is Int32:
        return 90000 + n
    if codec is Int64:
        return (1 << 41) + n
    if codec is Float64:
        return 1.5 + n
    if codec is Boolean:
        return n % 2 == 0  # both values, and not always the default
    if codec is UUID:
        return uuid.UUID(int=(0xDEF << 64) + n)
    if codec is Bytes:
        return bytes([n % 256, 9])
    if isinstance(codec, String):
        return f"r{n}"
    raise AssertionError(codec)


def sample(cls, version: int):
    return build(cls, cls._struct, version, [0], _scalar, 2)


CASES = [pytest.param(cls, v, id=f"{cls.__name__}-v{v}")
         for cls in r.RECORD_CLASSES for v in range(cls.min_version, cls.max_version + 1)]


@pytest.mark.parametrize(("cls", "version"), CASES)
def test_round_trip_every_version(cls, version):
    rec = sample(cls, version)
    body = rec.encode(version=version, header=False)
    assert cls.decode(body, version=version, header=False) == rec
    with_version = rec.encode(version=version)  # kafka-python's ApiData header: int16 version
    assert cls.decode(with_version) == rec


def test_tables():
    assert {k: c.__name__ for k, c in r.METADATA_RECORDS.items()} == {
        0: "RegisterBrokerRecord", 2: "TopicRecord", 3: "PartitionRecord", 4: "ConfigRecord",
        5: "PartitionChangeRecord", 7: "FenceBrokerRecord", 8: "UnfenceBrokerRecord",
        9: "RemoveTopicRecord", 11: "UserScramCredentialRecord", 15: "ProducerIdsRecord",
        18: "AccessControlEntryRecord", 19: "RemoveAccessControlEntryRecord",
        22: "RemoveUserScramCredentialRecord", 1000: "TopicPartitionCountRecord",
        1001: "RemovePartitionRecord", 1002: "PartitionReassignmentRecord"}
    assert {k: c.__name__ for k, c in r.COORDINATOR_KEYS.items()} == {
        0: "OffsetCommitKey", 1: "OffsetCommitKey", 2: "GroupMetadataKey", 3: "ConsumerGroupMetadataKey",
        4: "ConsumerGroupPartitionMetadataKey", 5: "ConsumerGroupMemberMetadataKey",
        6: "ConsumerGroupTargetAssignmentMetadataKey", 7: "ConsumerGroupTargetAssignmentMemberKey",
        8: "ConsumerGroupCurrentMemberAssignmentKey"}
    for k, key_cls in r.COORDINATOR_KEYS.items():
        assert r.COORDINATOR_VALUES[k].__name__ == key_cls.__name__.replace("Key", "Value")


@pytest.mark.parametrize("cls", list(r.METADATA_RECORDS.values()), ids=lambda c: c.__name__)
def test_metadata_record_framing(cls):
    for version in range(cls.min_version, cls.max_version + 1):
        rec = sample(cls, version)
        framed = r.encode_metadata_record(rec)
        assert framed[:1] == b"\x01"  # frame version
        assert r.decode_metadata_record(framed) == rec
    with pytest.raises(ValueError):
        r.decode_metadata_record(r.encode_metadata_record(sample(cls, 0)) + b"\x00")


def test_coordinator_record_framing_and_tombstone():
    for k, key_cls in r.COORDINATOR_KEYS.items():
        key = sample(key_cls, 0)
        value_cls = r.COORDINATOR_VALUES[k]
        value = sample(value_cls, value_cls.max_version)
        kb = r.encode_coordinator_key(key, record_type=k)
        assert kb[:2] == k.to_bytes(2, "big")
        assert r.decode_coordinator_record(kb, r.encode_coordinator_value(value)) == (key, value)
        assert r.decode_coordinator_record(kb, None) == (key, None)
    with pytest.raises(ValueError):
        r.encode_coordinator_key(sample(r.GroupMetadataKey, 0), record_type=3)


def test_offset_commit_value_known_bytes():
    # v3 (not flexible): offset, leaderEpoch, metadata, commitTimestamp
    v = r.OffsetCommitValue(version=3, offset=42, leader_epoch=7, metadata="m", commit_timestamp=1000)
    assert r.encode_coordinator_value(v) == (
        b"\x00\x03" + (42).to_bytes(8, "big") + (7).to_bytes(4, "big") + b"\x00\x01m" + (1000).to_bytes(8, "big"))


def test_kip1101_metadata_hash_is_a_tag_defaulting_to_zero():
    key = r.ConsumerGroupMetadataKey(version=0, group_id="g")
    old = r.ConsumerGroupMetadataValue(version=0, epoch=5)           # written before KIP-1101
    new = r.ConsumerGroupMetadataValue(version=0, epoch=6, metadata_hash=-123456789)
    old_bytes = r.encode_coordinator_value(old)
    assert old_bytes == b"\x00\x00" + (5).to_bytes(4, "big") + b"\x00"
    assert r.decode_coordinator_record(r.encode_coordinator_key(key), old_bytes)[1].metadata_hash == 0
    got = r.decode_coordinator_record(r.encode_coordinator_key(key), r.encode_coordinator_value(new))[1]
    assert (got.epoch, got.metadata_hash) == (6, -123456789)
    # the deprecated partition metadata record is tombstoned, which is just a None value
    pm_key = r.encode_coordinator_key(r.ConsumerGroupPartitionMetadataKey(version=0, group_id="g"))
    assert r.decode_coordinator_record(pm_key, None) == (r.ConsumerGroupPartitionMetadataKey(version=0, group_id="g"), None)


def test_kip253_fields_on_metadata_records():
    tid = uuid.UUID(int=9)
    topic = r.TopicRecord(version=0, name="t", topic_id=tid)
    assert (topic.initial_partition_count, topic.undeleted_partition_count) == (-1, -1)
    assert r.encode_metadata_record(topic) == b"\x01\x02\x00" + b"\x02t" + tid.bytes + b"\x00"

    after = r.PartitionRecord.PartitionLeaderEpochAfterCreation
    part = r.PartitionRecord(version=0, partition_id=3, topic_id=tid, replicas=[1], isr=[1], removing_replicas=[],
                             adding_replicas=[], leader=1, leader_epoch=4, partition_epoch=2,
                             leader_epoch_after_creation=[after(partition_index=1, leader_epoch=3)])
    got = r.decode_metadata_record(r.encode_metadata_record(part))
    assert got == part and got.leader_epoch_before_deletion == []

    change = r.PartitionChangeRecord(version=0, partition_id=1, topic_id=tid, leader_epoch=9)
    got = r.decode_metadata_record(r.encode_metadata_record(change))
    assert (got.leader, got.isr, got.partition_epoch, got.leader_epoch) == (-2, None, -1, 9)
    assert got.leader_epoch_before_deletion is None  # unchanged
    before = r.PartitionChangeRecord.PartitionLeaderEpochBeforeDeletion
    marked = r.PartitionChangeRecord(version=0, partition_id=5, topic_id=tid,
                                     leader_epoch_before_deletion=[before(partition_index=1, leader_epoch=9)])
    assert r.decode_metadata_record(r.encode_metadata_record(marked)) == marked

    counts = r.TopicPartitionCountRecord(version=0, topic_id=tid, initial_partition_count=2, undeleted_partition_count=3)
    assert r.decode_metadata_record(r.encode_metadata_record(counts)) == counts
