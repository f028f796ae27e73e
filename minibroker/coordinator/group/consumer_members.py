"""KIP-848 members as a heartbeat finds and leaves them (ConsumerGroupCoordinator's heartbeat):
which member it is for, whether its epoch is valid, and the member with the heartbeat's fields.
Pure functions over a group; a refusal is a GroupError carrying Kafka's error code.
"""
from __future__ import annotations

import dataclasses

from minibroker.coordinator.errors import (
    FENCED_INSTANCE_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED, UNKNOWN_MEMBER_ID,
    UNRELEASED_INSTANCE_ID)
from minibroker.coordinator.group.consumer_group import (
    GROUP_CONSUMER_MAX_SIZE, LEAVE_GROUP_STATIC_MEMBER_EPOCH, MEMBER_STABLE, Assignment,
    ConsumerGroup, ConsumerGroupMember)
from minibroker.protocol.messages import ConsumerGroupHeartbeatRequest


class GroupError(Exception):
    """A request refused with a Kafka error code (caught in this module, never on the wire)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_epoch(member: ConsumerGroupMember, received: int, owned: Assignment | None) -> None:
    """Kafka's throwIfMemberEpochIsInvalid."""
    if received > member.member_epoch:
        raise GroupError(FENCED_MEMBER_EPOCH, f"The consumer group member has a greater "
                         f"member epoch ({received}) than the one known by the group "
                         f"coordinator ({member.member_epoch}). The member must abandon all "
                         f"its partitions and rejoin.")
    if received < member.member_epoch:
        ok = received == member.previous_member_epoch and owned is not None and all(
            parts <= member.assigned_partitions.get(tid, frozenset())
            for tid, parts in owned.items())
        if not ok:
            raise GroupError(FENCED_MEMBER_EPOCH, f"The consumer group member has a smaller "
                             f"member epoch ({received}) than the one known by the group "
                             f"coordinator ({member.member_epoch}). The member must abandon "
                             f"all its partitions and rejoin.")


def member_for_heartbeat(group: ConsumerGroup, req: ConsumerGroupHeartbeatRequest,
                         member_id: str, owned: Assignment | None
                         ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
    """The member a heartbeat is for (new, rejoining, or a static member taking over
    another's instance id), and the member it replaces; GroupError when refused."""
    gid = req.group_id
    replaced: ConsumerGroupMember | None = None
    static = req.instance_id
    if req.member_epoch == 0:
        existing_static = group.members.get(group.static_members.get(static, "")) \
            if static else None
        if existing_static is not None and existing_static.member_id != member_id:
            if existing_static.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(UNRELEASED_INSTANCE_ID, f"Static member {member_id} with "
                                 f"instance id {static} cannot join the group because the "
                                 f"instance id is owned by {existing_static.member_id} "
                                 f"member.")
            # The new member takes over the old one: its assignment and target.
            replaced = existing_static
            member = dataclasses.replace(existing_static, member_id=member_id,
                                         member_epoch=0, previous_member_epoch=0)
        else:
            old = group.members.get(member_id)
            if old is None and len(group.members) >= GROUP_CONSUMER_MAX_SIZE:
                raise GroupError(GROUP_MAX_SIZE_REACHED, f"The consumer group has reached "
                                 f"its maximum capacity of {GROUP_CONSUMER_MAX_SIZE} members.")
            member = ConsumerGroupMember(member_id) if old is None else dataclasses.replace(
                old, member_epoch=0, previous_member_epoch=0, state=MEMBER_STABLE,
                assigned_partitions={}, partitions_pending_revocation={})
    else:
        member = group.members.get(member_id)
        if static:
            mapped = group.static_members.get(static)
            if mapped is None:
                raise GroupError(UNKNOWN_MEMBER_ID, f"Instance id {static} is unknown.")
            if mapped != member_id:
                raise GroupError(FENCED_INSTANCE_ID, f"Static member {member_id} with "
                                 f"instance id {static} was fenced by member {mapped}.")
        if member is None:
            raise GroupError(UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of "
                             f"group {gid}.")
        check_epoch(member, req.member_epoch, owned)
    return member, replaced


def updated_member(member: ConsumerGroupMember, req, regex: str | None, client_id: str,
                   client_host: str) -> ConsumerGroupMember:
    """The member as a heartbeat's fields (those sent; -1 / null keep the last) leave it."""
    names = req.subscribed_topic_names
    static = req.instance_id
    return dataclasses.replace(
        member,
        instance_id=static if static is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        client_id=client_id, client_host=client_host,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1
        else member.rebalance_timeout_ms,
        subscribed_topic_names=tuple(sorted(set(names))) if names is not None
        else member.subscribed_topic_names,
        subscribed_topic_regex=(regex or None) if regex is not None
        else member.subscribed_topic_regex,
        server_assignor=(req.server_assignor or None) if req.server_assignor is not None
        else member.server_assignor)
