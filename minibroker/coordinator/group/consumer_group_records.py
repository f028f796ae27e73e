"""The KIP-848 coordinator records of a consumer group (types 3-8 in __consumer_offsets) and
`replay`, the one function that applies them, both live (as the coordinator generates them)
and when a broker loads a partition.

Member metadata, group epoch + MetadataHash, target assignment members + metadata, current member
assignment; a None value is a tombstone. The deprecated ConsumerGroupPartitionMetadataValue is
only replayed (and tombstoned by the group's first heartbeat).
"""
from __future__ import annotations

import dataclasses

from minibroker.coordinator.group.consumer_group import (Assignment, ConsumerGroup,
    ConsumerGroupMember, LEAVE_GROUP_MEMBER_EPOCH, MEMBER_STABLE)
from minibroker.protocol.records import (
    ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue, ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue, ConsumerGroupPartitionMetadataKey,
    ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue,
    decode_coordinator_record, encode_coordinator_key, encode_coordinator_value)

Record = tuple[bytes, "bytes | None"]
_CONSUMER_RECORD_TYPES = frozenset(range(3, 9))


# ---------------------------------------------------------------------------------- records
def topic_partitions_of(cls, a: Assignment) -> list:
    return [cls(topic_id=tid, partitions=sorted(a[tid])) for tid in sorted(a)]


def assignment_of(tps) -> Assignment:
    return {tp.topic_id: frozenset(tp.partitions) for tp in tps or () if tp.partitions}


def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> Record:
    return (encode_coordinator_key(ConsumerGroupMemberMetadataKey(group_id=group_id,
                                                                  member_id=m.member_id)),
            encode_coordinator_value(ConsumerGroupMemberMetadataValue(
                instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
                client_host=m.client_host, subscribed_topic_names=list(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor,
                classic_member_metadata=None), 0))


def member_metadata_tombstone(group_id: str, member_id: str) -> Record:
    return encode_coordinator_key(ConsumerGroupMemberMetadataKey(group_id=group_id,
                                                                 member_id=member_id)), None


def group_epoch_record(group_id: str, epoch: int, metadata_hash: int) -> Record:
    return (encode_coordinator_key(ConsumerGroupMetadataKey(group_id=group_id)),
            encode_coordinator_value(ConsumerGroupMetadataValue(epoch=epoch,
                                                                metadata_hash=metadata_hash), 0))


def group_epoch_tombstone(group_id: str) -> Record:
    return encode_coordinator_key(ConsumerGroupMetadataKey(group_id=group_id)), None


def partition_metadata_tombstone(group_id: str) -> Record:
    return encode_coordinator_key(ConsumerGroupPartitionMetadataKey(group_id=group_id)), None


def target_member_record(group_id: str, member_id: str, a: Assignment) -> Record:
    V = ConsumerGroupTargetAssignmentMemberValue
    return (encode_coordinator_key(ConsumerGroupTargetAssignmentMemberKey(group_id=group_id,
                                                                          member_id=member_id)),
            encode_coordinator_value(V(topic_partitions=topic_partitions_of(V.TopicPartition, a)), 0))


def target_member_tombstone(group_id: str, member_id: str) -> Record:
    return encode_coordinator_key(ConsumerGroupTargetAssignmentMemberKey(
        group_id=group_id, member_id=member_id)), None


def target_metadata_record(group_id: str, assignment_epoch: int) -> Record:
    return (encode_coordinator_key(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id)),
            encode_coordinator_value(ConsumerGroupTargetAssignmentMetadataValue(
                assignment_epoch=assignment_epoch), 0))


def target_metadata_tombstone(group_id: str) -> Record:
    return encode_coordinator_key(ConsumerGroupTargetAssignmentMetadataKey(group_id=group_id)), \
        None


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> Record:
    V = ConsumerGroupCurrentMemberAssignmentValue
    return (encode_coordinator_key(ConsumerGroupCurrentMemberAssignmentKey(
                group_id=group_id, member_id=m.member_id)),
            encode_coordinator_value(V(
                member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
                state=m.state, assigned_partitions=topic_partitions_of(V.TopicPartitions, m.assigned_partitions),
                partitions_pending_revocation=topic_partitions_of(V.TopicPartitions,
                                                   m.partitions_pending_revocation)), 0))


def current_assignment_tombstone(group_id: str, member_id: str) -> Record:
    return encode_coordinator_key(ConsumerGroupCurrentMemberAssignmentKey(
        group_id=group_id, member_id=member_id)), None


def is_consumer_group_record(key: bytes) -> bool:
    return len(key) >= 2 and int.from_bytes(key[:2], "big", signed=True) in _CONSUMER_RECORD_TYPES


def replay(groups: dict[str, ConsumerGroup], key: bytes, value: bytes | None) -> None:
    """Apply one KIP-848 coordinator record to the consumer groups of one partition."""
    k, v = decode_coordinator_record(key, value)
    gid = k.group_id
    group = groups.get(gid)
    if isinstance(k, ConsumerGroupMetadataKey):
        if v is None:
            if group is not None:
                group.cancel_timers()
                del groups[gid]
            return
        group = group or groups.setdefault(gid, ConsumerGroup(gid))
        group.group_epoch = v.epoch
        group.metadata_hash = v.metadata_hash or 0
        return
    if isinstance(k, ConsumerGroupPartitionMetadataKey):
        if v is not None:
            groups.setdefault(gid, ConsumerGroup(gid)).has_partition_metadata_record = True
        elif group is not None:
            group.has_partition_metadata_record = False
        return
    if v is None and group is None:
        return
    group = group or groups.setdefault(gid, ConsumerGroup(gid))
    if isinstance(k, ConsumerGroupTargetAssignmentMetadataKey):
        group.assignment_epoch = v.assignment_epoch if v is not None else 0
        return
    if isinstance(k, ConsumerGroupTargetAssignmentMemberKey):
        if v is None:
            group.target_assignment.pop(k.member_id, None)
        else:
            group.target_assignment[k.member_id] = assignment_of(v.topic_partitions)
        return
    old = group.members.get(k.member_id) or ConsumerGroupMember(k.member_id)
    if isinstance(k, ConsumerGroupMemberMetadataKey):
        if v is None:
            group.remove_member(k.member_id)
            return
        group.update_member(dataclasses.replace(
            old, instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id,
            client_host=v.client_host, subscribed_topic_names=tuple(v.subscribed_topic_names),
            subscribed_topic_regex=v.subscribed_topic_regex,
            rebalance_timeout_ms=v.rebalance_timeout_ms, server_assignor=v.server_assignor))
    elif isinstance(k, ConsumerGroupCurrentMemberAssignmentKey):
        if v is None:
            if k.member_id in group.members:
                group.update_member(dataclasses.replace(
                    old, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                    previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH, state=MEMBER_STABLE,
                    assigned_partitions={}, partitions_pending_revocation={}))
            return
        group.update_member(dataclasses.replace(
            old, member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch,
            state=v.state, assigned_partitions=assignment_of(v.assigned_partitions),
            partitions_pending_revocation=assignment_of(v.partitions_pending_revocation)))
