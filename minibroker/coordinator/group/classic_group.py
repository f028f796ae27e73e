"""A classic group (Kafka's GroupMetadata / MemberMetadata): members, states and protocol choice.

States, as Kafka's classic group: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead.
Valid transitions (Kafka's GroupState.validPreviousStates):
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Empty               <- PreparingRebalance
    Dead                <- Stable, PreparingRebalance, CompletingRebalance, Empty, Dead

This module is data and pure decisions only; the protocol (join/sync/heartbeat/...) lives in
minibroker.coordinator.group.classic_coordinator, which drives a rebalance on these objects in
plain synchronous code; what a group stores (generation, protocol, leader, members' metadata and
assignments, offsets) changes through minibroker.coordinator.group.classic_group_records.replay.
Members keep their insertion order (Python dicts), which is the order JoinGroup responses list
them in.
"""
from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"

VALID_PREVIOUS = {
    PREPARING_REBALANCE: {STABLE, COMPLETING_REBALANCE, EMPTY},
    COMPLETING_REBALANCE: {PREPARING_REBALANCE},
    STABLE: {COMPLETING_REBALANCE},
    EMPTY: {PREPARING_REBALANCE},
    DEAD: {STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, EMPTY, DEAD},
}
CONSUMER_PROTOCOL_TYPE = "consumer"


@dataclass(slots=True)
class JoinResult:
    error_code: int
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(slots=True)
class SyncResult:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


class ClassicGroupMember:
    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host",
                 "rebalance_timeout_ms", "session_timeout_ms", "protocol_type",
                 "supported_protocols", "assignment", "join_future", "sync_future", "is_new",
                 "heartbeat_satisfied", "heartbeat_timer")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str,
                 client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                 protocol_type: str, supported_protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = b""
        self.join_future: asyncio.Future | None = None
        self.sync_future: asyncio.Future | None = None
        self.is_new = False
        self.heartbeat_satisfied = False
        self.heartbeat_timer: asyncio.TimerHandle | None = None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocols(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.supported_protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return list(protocols) == list(self.supported_protocols)

    def has_satisfied_heartbeat(self) -> bool:
        """Kafka's MemberMetadata.hasSatisfiedHeartbeat."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def complete_join(self, result: JoinResult) -> None:
        fut, self.join_future = self.join_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    def complete_sync(self, result: SyncResult) -> None:
        fut, self.sync_future = self.sync_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    def cancel_heartbeat(self) -> None:
        if self.heartbeat_timer is not None:
            self.heartbeat_timer.cancel()
            self.heartbeat_timer = None


class ClassicGroup:
    def __init__(self, group_id: str, state: str = EMPTY, now_ms: int = -1) -> None:
        self.group_id = group_id
        self.state = state
        self.current_state_timestamp = now_ms      # -1: unknown (a group loaded from old records)
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}
        self.pending_members: dict[str, asyncio.TimerHandle | None] = {}
        self.pending_sync_members: set[str] = set()
        self.static_members: dict[str, str] = {}            # group.instance.id -> member id
        self.new_member_added = False
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # The rebalance (join) timer and the pending-sync timer, with a token so a stale timer that
        # already fired in the loop's queue does nothing.
        self.join_timer: asyncio.TimerHandle | None = None
        self.join_initial_delay: tuple[int, int] | None = None   # (delay, remaining) while initial
        self.sync_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ state
    def is_(self, state: str) -> bool:
        return self.state == state

    def transition_to(self, state: str, now_ms: int) -> None:
        assert self.state in VALID_PREVIOUS[state], (
            f"group {self.group_id}: {self.state} -> {state} is not a valid transition")
        self.state = state
        self.current_state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS[PREPARING_REBALANCE]

    # ------------------------------------------------------------------ members
    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: ClassicGroupMember, join_future: asyncio.Future | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type
        self.members[member.member_id] = member
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join_future = join_future
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> ClassicGroupMember | None:
        member = self.members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        if member is None:
            return None
        member.cancel_heartbeat()
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """A known instance id mapped to another member id (Kafka's isStaticMemberFenced)."""
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str, fenced_code: int) -> ClassicGroupMember:
        """The new member id takes over the old member (its assignment included); whoever waits
        as the old member is told FENCED_INSTANCE_ID."""
        member = self.members.pop(old_member_id)
        member.complete_join(JoinResult(fenced_code, old_member_id))
        member.complete_sync(SyncResult(fenced_code))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        self.static_members[group_instance_id] = new_member_id
        return member

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, m in self.members.items():
            if m.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # ------------------------------------------------------------------ protocols
    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = [n for n, _ in protocols]
        if self.is_(EMPTY) or not self.members:
            return bool(protocol_type) and bool(names)
        if self.protocol_type != protocol_type:
            return False
        n = len(self.members)
        counts = self._protocol_counts()
        return any(counts.get(name, 0) == n for name in names)

    def _protocol_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self.members.values():
            # A name listed twice by one member counts once, as Kafka's member.protocols() is a
            # set (its first entry's metadata is the one used).
            for name in dict.fromkeys(m.protocols()):
                counts[name] = counts.get(name, 0) + 1
        return counts

    def select_protocol(self) -> str:
        """A protocol every member supports, chosen by votes: each member votes for the first of
        its own protocols that is a candidate; most votes wins, ties by the leader-ordered first."""
        n = len(self.members)
        counts = self._protocol_counts()
        candidates = [name for name, c in counts.items() if c == n]
        assert candidates, f"group {self.group_id}: no protocol supported by all members"
        votes: dict[str, int] = {c: 0 for c in candidates}
        for m in self.members.values():
            vote = next(p for p in m.protocols() if p in votes)
            votes[vote] += 1
        return max(candidates, key=lambda c: (votes[c], -candidates.index(c)))

    def init_next_generation(self, now_ms: int) -> None:
        """A generation with members (an Empty one is stored and replayed instead)."""
        assert self.members, f"group {self.group_id}: no members for a new generation"
        self.generation_id += 1
        self.protocol_name = self.select_protocol()
        self.pending_sync_members = set(self.members)
        self.transition_to(COMPLETING_REBALANCE, now_ms)

    # ------------------------------------------------------------------ subscriptions
    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, when the protocol type is consumer and every member's
        subscription parses; None when unknown (Kafka then treats every topic as subscribed)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= parse_subscription_topics(m.metadata(self.protocol_name))
            except (KeyError, ValueError, struct.error):
                return None
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return topics is None or topic in topics

    # ------------------------------------------------------------------ timers
    def cancel_timers(self) -> None:
        for t in (self.join_timer, self.sync_timer):
            if t is not None:
                t.cancel()
        self.join_timer = self.sync_timer = None
        for handle in self.pending_members.values():
            if handle is not None:
                handle.cancel()
        for m in self.members.values():
            m.cancel_heartbeat()


def parse_subscription_topics(data: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (any version: int16 version, then the topics)."""
    if len(data) < 6:
        raise ValueError("subscription too short")
    (count,) = struct.unpack_from(">i", data, 2)
    if count < 0 or count > len(data):
        raise ValueError("bad topic count")
    pos, out = 6, set()
    for _ in range(count):
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2
        if n < 0 or pos + n > len(data):
            raise ValueError("bad topic name")
        out.add(bytes(data[pos:pos + n]).decode())
        pos += n
    return out
