"""A KIP-848 consumer group (Kafka's ConsumerGroup / ConsumerGroupMember) and the member
reconciliation (Kafka's CurrentAssignmentBuilder).

Members are frozen dataclasses; a group changes only through `replay`
(minibroker.coordinator.group.consumer_group_records), live and on load. `reconcile` computes a
member's next state towards its target assignment: partitions it must give up are "pending
revocation" (member epoch unchanged, state UNREVOKED_PARTITIONS) until a heartbeat shows it no
longer owns them; a partition another member still owns is not given to its new owner
("unreleased", state UNRELEASED_PARTITIONS) until the old owner released it.
"""
from __future__ import annotations

import asyncio
import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Callable


from minibroker.coordinator.group.assignors import DEFAULT_ASSIGNOR

# Member states (ConsumerGroupCurrentMemberAssignmentValue.State).
MEMBER_STABLE = 0
UNREVOKED_PARTITIONS = 1
UNRELEASED_PARTITIONS = 2
UNKNOWN = 3
# Group states as ConsumerGroupDescribe / ListGroups spell them.
EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD = "Empty", "Assigning", "Reconciling", "Stable", "Dead"
CONSUMER_GROUP_TYPE = "consumer"

GROUP_CONSUMER_MAX_SIZE = 2**31 - 1     # group.consumer.max.size's default (not configurable here)
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


# Kafka's GroupCoordinatorService.handleOperationException for failed writes.

Assignment = dict[uuid.UUID, frozenset[int]]


# ---------------------------------------------------------------------------------- model
@dataclass(frozen=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: int = MEMBER_STABLE
    assigned_partitions: Assignment = field(default_factory=dict)
    partitions_pending_revocation: Assignment = field(default_factory=dict)

    def metadata(self) -> tuple:
        return (self.instance_id, self.rack_id, self.client_id, self.client_host,
                self.subscribed_topic_names, self.subscribed_topic_regex,
                self.rebalance_timeout_ms, self.server_assignor)

    def assignment(self) -> tuple:
        return (self.member_epoch, self.previous_member_epoch, self.state,
                self.assigned_partitions, self.partitions_pending_revocation)

    def subscription(self) -> tuple:
        return (self.subscribed_topic_names, self.subscribed_topic_regex)


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.metadata_hash = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}             # instance id -> member id
        self.target_assignment: dict[str, Assignment] = {}
        # (topic id, partition) -> (member id, member epoch) of its current owner.
        self.owners: dict[tuple[uuid.UUID, int], tuple[str, int]] = {}
        self.has_partition_metadata_record = False
        # Runtime only (not records): timers and the resolved subscription.
        self.timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self.subscribed_topics: frozenset[str] = frozenset()

    def __repr__(self) -> str:
        return (f"ConsumerGroup({self.group_id}, epoch={self.group_epoch}, "
                f"assignment_epoch={self.assignment_epoch}, hash={self.metadata_hash}, "
                f"members={sorted(self.members)})")

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.group_epoch != self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != MEMBER_STABLE:
                return RECONCILING
        return STABLE

    def preferred_assignor(self) -> str:
        counts: dict[str, int] = {}
        for m in self.members.values():
            if m.server_assignor:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return DEFAULT_ASSIGNOR
        return min(counts, key=lambda a: (-counts[a], a))

    # -------------------------------------------------------------- applied only by replay
    def update_member(self, new: ConsumerGroupMember) -> None:
        old = self.members.get(new.member_id)
        if old is not None:
            self._drop_owners(old)
            if old.instance_id and self.static_members.get(old.instance_id) == old.member_id:
                del self.static_members[old.instance_id]
        self.members[new.member_id] = new
        if new.instance_id:
            self.static_members[new.instance_id] = new.member_id
        for a in (new.assigned_partitions, new.partitions_pending_revocation):
            for tid, parts in a.items():
                for p in parts:
                    self.owners[(tid, p)] = (new.member_id, new.member_epoch)

    def remove_member(self, member_id: str) -> None:
        old = self.members.pop(member_id, None)
        if old is None:
            return
        self._drop_owners(old)
        if old.instance_id and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]

    def _drop_owners(self, m: ConsumerGroupMember) -> None:
        for a in (m.assigned_partitions, m.partitions_pending_revocation):
            for tid, parts in a.items():
                for p in parts:
                    if self.owners.get((tid, p), (None,))[0] == m.member_id:
                        del self.owners[(tid, p)]

    def cancel_timers(self) -> None:
        for t in self.timers.values():
            t.cancel()
        self.timers.clear()


# ---------------------------------------------------------------------------------- reconciliation
def _owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
    """Kafka's ownsRevokedPartitions: unknown owned partitions (null) count as still owned."""
    if owned is None:
        return any(revoking.values())
    return any(owned.get(tid, frozenset()) & parts for tid, parts in revoking.items())


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              owned: Assignment | None,
              owner_of: Callable[[uuid.UUID, int], str | None]) -> ConsumerGroupMember:
    """Kafka's CurrentAssignmentBuilder: the member's next state towards its target assignment.
    `owned`: the partitions the heartbeat says it owns (None: not sent); `owner_of`: the member id
    currently owning a partition (assigned or pending revocation), None if free."""
    if member.state == UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.partitions_pending_revocation):
            return member
        return _next(member, min(member.member_epoch + 1, target_epoch),
                     member.assigned_partitions, target_epoch, target, owned, owner_of)
    if member.state in (MEMBER_STABLE, UNRELEASED_PARTITIONS):
        if member.member_epoch != target_epoch or member.state == UNRELEASED_PARTITIONS:
            return _next(member, member.member_epoch, member.assigned_partitions, target_epoch,
                         target, owned, owner_of)
        return member
    # UNKNOWN: the member is in an unexpected state; it gets fenced by its next bad epoch.
    return member


def _next(member, member_epoch, current: Assignment, target_epoch, target, owned, owner_of):
    new_assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoking: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for tid in sorted(set(current) | set(target)):
        cur = current.get(tid, frozenset())
        tgt = target.get(tid, frozenset())
        keep = set(cur & tgt)
        for p in sorted(tgt - cur):
            o = owner_of(tid, p)
            if o is None or o == member.member_id:
                keep.add(p)
            else:
                unreleased = True
        if keep:
            new_assigned[tid] = frozenset(keep)
        if cur - tgt:
            revoking[tid] = frozenset(cur - tgt)
    if revoking and _owns_any(owned, revoking):
        # Revoke first: the member stays in its epoch, keeping only the partitions it retains.
        return dataclasses.replace(
            member, state=UNREVOKED_PARTITIONS, member_epoch=member_epoch,
            previous_member_epoch=member.member_epoch,
            assigned_partitions={t: frozenset(cur & target.get(t, frozenset()))
                                 for t, cur in current.items() if cur & target.get(t, frozenset())},
            partitions_pending_revocation=revoking)
    return dataclasses.replace(
        member, state=UNRELEASED_PARTITIONS if unreleased else MEMBER_STABLE,
        member_epoch=target_epoch, previous_member_epoch=member.member_epoch,
        assigned_partitions=new_assigned, partitions_pending_revocation={})
