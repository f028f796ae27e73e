"""The classic coordinator records (offset commits and classic group metadata) and `replay`, the
one function that applies them to a partition's groups: live, at the point the coordinator writes
them, and when a broker loads the partition.

Record formats (Kafka's, via minibroker.protocol.records):
- offset commit: key OffsetCommitKey (type 1: group, topic, partition), value OffsetCommitValue
  version 3 (offset, leaderEpoch, metadata, commitTimestamp) — or version 1 when an explicit expire
  timestamp was asked for (OffsetCommit v2-4 retention_time_ms), as Kafka writes it.
- group metadata: key GroupMetadataKey (type 2: group), value GroupMetadataValue version 3
  (protocolType, generation, protocol, leader, currentStateTimestamp, members with groupInstanceId,
  rebalance/session timeouts, subscription and assignment).
- a None value is a tombstone (offset deleted or expired; group deleted).
"""
from __future__ import annotations

from minibroker.coordinator.group.classic_group import (DEAD, EMPTY, STABLE, ClassicGroup,
                                                        ClassicGroupMember, OffsetAndMetadata)
from minibroker.protocol.records import (GroupMetadataKey, GroupMetadataValue, OffsetCommitKey,
                                         OffsetCommitValue, decode_coordinator_record,
                                         encode_coordinator_key, encode_coordinator_value)

OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

Record = tuple[bytes, "bytes | None"]


# ---------------------------------------------------------------------------------- records
def offset_commit_record(group_id: str, topic: str, partition: int,
                         om: OffsetAndMetadata) -> Record:
    key = encode_coordinator_key(OffsetCommitKey(group=group_id, topic=topic, partition=partition))
    if om.expire_timestamp != -1:
        value = OffsetCommitValue(offset=om.offset, metadata=om.metadata,
                                  commit_timestamp=om.commit_timestamp,
                                  expire_timestamp=om.expire_timestamp)
        return key, encode_coordinator_value(value, 1)
    value = OffsetCommitValue(offset=om.offset, leader_epoch=om.leader_epoch,
                              metadata=om.metadata, commit_timestamp=om.commit_timestamp)
    return key, encode_coordinator_value(value, OFFSET_COMMIT_VALUE_VERSION)


def offset_tombstone(group_id: str, topic: str, partition: int) -> Record:
    key = encode_coordinator_key(OffsetCommitKey(group=group_id, topic=topic, partition=partition))
    return key, None


def group_metadata_record(group: ClassicGroup, assignments: dict[str, bytes] | None = None) -> Record:
    """The group as Kafka stores it (GroupMetadataManager.groupMetadataValue); `assignments`
    overrides the members' current assignments (the leader's SyncGroup, before it is applied)."""
    Member = GroupMetadataValue.MemberMetadata
    members = []
    for m in group.members.values():
        members.append(Member(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
            session_timeout=m.session_timeout_ms,
            subscription=m.metadata(group.protocol_name) if group.protocol_name else b"",
            assignment=(assignments or {}).get(m.member_id, m.assignment)))
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "", generation=group.generation_id,
        protocol=group.protocol_name, leader=group.leader_id,
        current_state_timestamp=group.current_state_timestamp, members=members)
    key = encode_coordinator_key(GroupMetadataKey(group=group.group_id))
    return key, encode_coordinator_value(value, GROUP_METADATA_VALUE_VERSION)


def empty_generation_record(group: ClassicGroup, now_ms: int) -> Record:
    """The group's next generation when no member is left (Kafka's initNextGeneration to
    Empty): no protocol, no members, Empty since `now_ms`."""
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "", generation=group.generation_id + 1,
        protocol=None, leader=group.leader_id, current_state_timestamp=now_ms, members=[])
    key = encode_coordinator_key(GroupMetadataKey(group=group.group_id))
    return key, encode_coordinator_value(value, GROUP_METADATA_VALUE_VERSION)


def group_tombstone(group_id: str) -> Record:
    return encode_coordinator_key(GroupMetadataKey(group=group_id)), None


# ---------------------------------------------------------------------------------- replay
def replay(groups: dict[str, ClassicGroup], key: bytes, value: bytes | None) -> None:
    """Apply one classic coordinator record to the groups of one __consumer_offsets partition:
    on load, and live at the point the coordinator writes the record (the only place a group's
    stored fields change).

    A group metadata record updates the group in place: generation, protocol type and name,
    leader, state (Stable with members, else Empty) and its timestamp, and the members (their
    ids, client, timeouts, subscription and assignment, in the record's order). A live member
    keeps its runtime state (waiting JoinGroup/SyncGroup, heartbeat timer) and its other
    supported protocols. Offsets of a group with no metadata record live in an Empty group (Kafka
    does the same for groups that only commit offsets). A group tombstone removes the group's
    membership; the group object stays while it still has offsets."""
    k, v = decode_coordinator_record(key, value)
    if isinstance(k, OffsetCommitKey):
        group = groups.get(k.group)
        if v is None:
            if group is not None:
                group.offsets.pop((k.topic, k.partition), None)
                _maybe_forget(groups, group)
            return
        if group is None:
            group = groups[k.group] = ClassicGroup(k.group, EMPTY)
        group.offsets[(k.topic, k.partition)] = OffsetAndMetadata(
            offset=v.offset, leader_epoch=v.leader_epoch if v.leader_epoch is not None else -1,
            metadata=v.metadata or "", commit_timestamp=v.commit_timestamp,
            expire_timestamp=v.expire_timestamp if v.expire_timestamp is not None else -1)
    elif isinstance(k, GroupMetadataKey):
        group = groups.get(k.group)
        if v is None:
            if group is not None:
                group.cancel_timers()
                group.state = DEAD
                holder = groups[k.group] = ClassicGroup(k.group, EMPTY)
                holder.offsets = group.offsets
                _maybe_forget(groups, holder)
            return
        if group is None:
            group = groups[k.group] = ClassicGroup(k.group, EMPTY)
        _apply_group_metadata(group, v)
    # Other coordinator record types (KIP-848 consumer groups) are not ours to apply.


def _apply_group_metadata(group: ClassicGroup, v: GroupMetadataValue) -> None:
    group.generation_id = v.generation
    group.protocol_type = v.protocol_type or None
    group.protocol_name = v.protocol
    group.leader_id = v.leader
    group.state = STABLE if v.members else EMPTY
    group.current_state_timestamp = v.current_state_timestamp \
        if v.current_state_timestamp is not None else -1
    old = group.members
    members: dict[str, ClassicGroupMember] = {}
    for mm in v.members:
        subscription = bytes(mm.subscription)
        rebalance_timeout = mm.rebalance_timeout if mm.rebalance_timeout is not None \
            else mm.session_timeout
        m = old.get(mm.member_id)
        if m is None:
            m = ClassicGroupMember(mm.member_id, mm.group_instance_id, mm.client_id,
                                   mm.client_host, rebalance_timeout, mm.session_timeout,
                                   v.protocol_type, [])
        else:
            m.group_instance_id = mm.group_instance_id
            m.client_id, m.client_host = mm.client_id, mm.client_host
            m.rebalance_timeout_ms, m.session_timeout_ms = rebalance_timeout, mm.session_timeout
            m.protocol_type = v.protocol_type
        if v.protocol and _metadata_of(m, v.protocol) != subscription:
            m.supported_protocols = [(v.protocol, subscription)]
        m.assignment = bytes(mm.assignment)
        members[m.member_id] = m
    for member_id in sorted(old.keys() - members.keys()):
        old[member_id].cancel_heartbeat()
    group.members = members
    group.static_members = {m.group_instance_id: m.member_id for m in members.values()
                            if m.group_instance_id is not None}
    group.pending_sync_members &= members.keys()


def _metadata_of(member: ClassicGroupMember, protocol: str) -> bytes | None:
    try:
        return member.metadata(protocol)
    except KeyError:
        return None


def _maybe_forget(groups: dict[str, ClassicGroup], group: ClassicGroup) -> None:
    if (group.is_(EMPTY) and not group.offsets and not group.members
            and not group.pending_members and group.generation_id == 0):
        group.state = DEAD
        del groups[group.group_id]
