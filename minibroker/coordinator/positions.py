"""KIP-253 part 7: the group coordinator's side of ConsumerGroupPosition (key 1000).

Members of a group tell the coordinator which partitions' positions they want (NeedPosition in the
request: the partitions their ordering barrier waits on) and report their own positions of the
partitions the coordinator asked them for.  Per group the coordinator keeps:

- the interest map: (topic, partition) -> member ids that want the group's position of it, each
  member's set replaced by its latest request (members that left drop out);
- the reported positions: (topic, partition) -> the largest position any member reported.

The response tells the member (a) for each partition it asked about, the group's position: the
largest of the reported positions and the committed offset (-1 if neither exists), and (b) with
NeedPosition, which partitions it owns (by the group's current assignment) that some member
wants, so it reports them next time.

Readings (schemas/README.md): positions only grow (a reported position means every record before
it was delivered to the application and its keys' state flushed, which a later seek back does not
undo); the committed offset is a floor of the group's position (records before it were returned
by poll). State lives in memory with the group object: when the coordinator moves, members report
again (the client resets its "reported" state when its coordinator changes) and the committed
offsets keep the floor meanwhile.

Validation is the Heartbeat's: INVALID_GROUP_ID, NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS,
UNKNOWN_MEMBER_ID (unknown group or member, or an Empty group), COORDINATOR_NOT_AVAILABLE (Dead),
ILLEGAL_GENERATION; while the group prepares a rebalance the reported positions are still
recorded and the answer is REBALANCE_IN_PROGRESS with no topics.
"""
from __future__ import annotations

import struct
import weakref
from typing import TYPE_CHECKING

import kafka.errors as Errors

from minibroker.coordinator.group.classic import (CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY,
                                                  PREPARING_REBALANCE, ClassicGroup)

if TYPE_CHECKING:
    from minibroker.coordinator.runtime import GroupCoordinatorRuntime

NONE = 0
INVALID_GROUP_ID = Errors.InvalidGroupIdError.errno
UNKNOWN_MEMBER_ID = Errors.UnknownMemberIdError.errno
ILLEGAL_GENERATION = Errors.IllegalGenerationError.errno
REBALANCE_IN_PROGRESS = Errors.RebalanceInProgressError.errno
COORDINATOR_NOT_AVAILABLE = Errors.CoordinatorNotAvailableError.errno

TopicPartitionKey = tuple[str, int]
# Request topics: [(topic, [(partition, need_position, position)])]; the response has the same shape.
PositionTopics = list[tuple[str, list[tuple[int, bool, int]]]]

_H = struct.Struct(">h")
_I = struct.Struct(">i")


def parse_assignment(data: bytes | None) -> set[TopicPartitionKey]:
    """The partitions of a 'consumer' protocol ConsumerProtocolAssignment (any version: later
    versions only append fields).  Undecodable bytes give an empty set."""
    out: set[TopicPartitionKey] = set()
    if not data:
        return out
    try:
        pos = 2                                         # version
        (n_topics,) = _I.unpack_from(data, pos)
        pos += 4
        for _ in range(max(n_topics, 0)):
            (n,) = _H.unpack_from(data, pos)
            pos += 2
            topic = bytes(data[pos:pos + n]).decode()
            pos += n
            (n_parts,) = _I.unpack_from(data, pos)
            pos += 4
            for _ in range(max(n_parts, 0)):
                (p,) = _I.unpack_from(data, pos)
                pos += 4
                out.add((topic, p))
    except (struct.error, UnicodeDecodeError):
        return set()
    return out


class GroupPositions:
    """The interest map and reported positions of one group."""

    __slots__ = ("interest", "positions")

    def __init__(self) -> None:
        self.interest: dict[str, set[TopicPartitionKey]] = {}     # member id -> partitions wanted
        self.positions: dict[TopicPartitionKey, int] = {}

    def report(self, tp: TopicPartitionKey, position: int) -> None:
        if position >= 0 and position > self.positions.get(tp, -1):
            self.positions[tp] = position

    def interested(self, tp: TopicPartitionKey, members) -> bool:
        return any(tp in self.interest.get(m, ()) for m in members)


class ConsumerGroupPositions:
    """Per coordinator runtime: GroupPositions of each loaded group (held with the group object,
    so an unloaded or deleted group's state goes with it)."""

    def __init__(self, rt: "GroupCoordinatorRuntime") -> None:
        self.rt = rt
        self._groups: "weakref.WeakKeyDictionary[ClassicGroup, GroupPositions]" = \
            weakref.WeakKeyDictionary()

    def state(self, group: ClassicGroup) -> GroupPositions:
        st = self._groups.get(group)
        if st is None:
            st = self._groups[group] = GroupPositions()
        return st

    def group_position(self, group: ClassicGroup, st: GroupPositions, tp: TopicPartitionKey) -> int:
        pos = st.positions.get(tp, -1)
        om = group.offsets.get(tp)
        if om is not None and om.offset > pos:
            pos = om.offset
        return pos

    def consumer_group_position(self, group_id: str, generation_id: int, member_id: str,
                                topics: PositionTopics) -> tuple[int, PositionTopics]:
        if not group_id:
            return INVALID_GROUP_ID, []
        shard, code = self.rt.shard_for(group_id)
        if code:
            return code, []
        group = shard.groups.get(group_id)
        if group is None or group.is_(EMPTY):
            return UNKNOWN_MEMBER_ID, []
        if group.is_(DEAD):
            return COORDINATOR_NOT_AVAILABLE, []
        if member_id not in group.members:
            return UNKNOWN_MEMBER_ID, []
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION, []
        st = self.state(group)
        wanted: set[TopicPartitionKey] = set()
        for topic, parts in topics:
            for partition, need_position, position in parts:
                if position >= 0:
                    st.report((topic, partition), position)
                if need_position:
                    wanted.add((topic, partition))
        st.interest[member_id] = wanted
        for m in [m for m in st.interest if m not in group.members]:
            del st.interest[m]
        if group.is_(PREPARING_REBALANCE):
            return REBALANCE_IN_PROGRESS, []
        out: dict[str, dict[int, tuple[int, bool, int]]] = {}
        for topic, partition in sorted(wanted):
            out.setdefault(topic, {})[partition] = (
                partition, False, self.group_position(group, st, (topic, partition)))
        owned = parse_assignment(group.members[member_id].assignment) \
            if group.protocol_type == CONSUMER_PROTOCOL_TYPE else set()
        others = sorted(m for m in st.interest if m != member_id)
        for tp in sorted(owned):
            if st.interested(tp, others):
                topic, partition = tp
                _, _, pos = out.setdefault(topic, {}).get(partition, (partition, False, -1))
                out[topic][partition] = (partition, True, pos)
        return NONE, [(t, [out[t][p] for p in sorted(out[t])]) for t in sorted(out)]
