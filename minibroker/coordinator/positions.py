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

Classic groups: validation is the Heartbeat's: INVALID_GROUP_ID, NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_MEMBER_ID (unknown group or member, or an Empty group),
COORDINATOR_NOT_AVAILABLE (Dead), ILLEGAL_GENERATION; while the group prepares a rebalance the
reported positions are still recorded and the answer is REBALANCE_IN_PROGRESS with no topics.

KIP-848 consumer groups: GenerationId is the member epoch, checked as Kafka checks a member's
OffsetCommit/OffsetFetch: UNKNOWN_MEMBER_ID (unknown member; an unknown group is classic's
UNKNOWN_MEMBER_ID too), STALE_MEMBER_EPOCH (epoch differs). There is no group-wide rebalance
barrier, so never REBALANCE_IN_PROGRESS. A member owns its assigned partitions and those pending
revocation; the committed-offset floor comes from the group's offset holder (shard.groups).
"""
from __future__ import annotations

import struct
import weakref

from minibroker.coordinator.context import CoordinatorContext, group_shard
from minibroker.coordinator.errors import (
    COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, NONE, REBALANCE_IN_PROGRESS,
    STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID)
from minibroker.coordinator.group.classic_group import (CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY,
                                                  PREPARING_REBALANCE, ClassicGroup)
from minibroker.coordinator.group.consumer_group import ConsumerGroup

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

    def __init__(self, rt: CoordinatorContext) -> None:
        self.rt = rt
        self._groups: "weakref.WeakKeyDictionary[ClassicGroup | ConsumerGroup, GroupPositions]" \
            = weakref.WeakKeyDictionary()

    def state(self, group: "ClassicGroup | ConsumerGroup") -> GroupPositions:
        st = self._groups.get(group)
        if st is None:
            st = self._groups[group] = GroupPositions()
        return st

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        """A partition re-created at the same index must not inherit the old one's position."""
        gone = set(partitions)
        for st in list(self._groups.values()):
            for tp in gone & st.positions.keys():
                del st.positions[tp]
            for wanted in st.interest.values():
                wanted -= gone

    def group_position(self, group: ClassicGroup | None, st: GroupPositions,
                       tp: TopicPartitionKey) -> int:
        """`group`: the holder of the committed offsets (a consumer group's offset holder)."""
        pos = st.positions.get(tp, -1)
        om = group.offsets.get(tp) if group is not None else None
        if om is not None and om.offset > pos:
            pos = om.offset
        return pos

    def consumer_group_position(self, group_id: str, generation_id: int, member_id: str,
                                topics: PositionTopics) -> tuple[int, PositionTopics]:
        shard, code = group_shard(self.rt, group_id)
        if code:
            return code, []
        consumer = shard.consumer_groups.get(group_id)
        if consumer is not None:
            return self._consumer_group_position(shard, consumer, generation_id, member_id,
                                                 topics)
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
        wanted = self._record(st, member_id, group.members, topics)
        if group.is_(PREPARING_REBALANCE):
            return REBALANCE_IN_PROGRESS, []
        owned = parse_assignment(group.members[member_id].assignment) \
            if group.protocol_type == CONSUMER_PROTOCOL_TYPE else set()
        return NONE, self._answer(group, st, member_id, wanted, owned)

    def _consumer_group_position(self, shard, group: ConsumerGroup, member_epoch: int,
                                 member_id: str, topics: PositionTopics
                                 ) -> tuple[int, PositionTopics]:
        """A KIP-848 member: checked as Kafka checks its OffsetCommit/OffsetFetch (unknown
        member, else the exact member epoch). No group-wide barrier: members reconcile one by
        one, so there is no REBALANCE_IN_PROGRESS. A member owns its assigned partitions and
        those pending revocation (it still consumes them until it acknowledges)."""
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID, []
        if member_epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH, []
        st = self.state(group)
        wanted = self._record(st, member_id, group.members, topics)
        owned: set[TopicPartitionKey] = set()
        by_id = self.rt.metadata.topics_by_id
        for a in (member.assigned_partitions, member.partitions_pending_revocation):
            for tid, parts in a.items():
                info = by_id.get(tid)
                if info is not None:
                    owned.update((info.name, p) for p in parts)
        return NONE, self._answer(shard.groups.get(group.group_id), st, member_id, wanted, owned)

    @staticmethod
    def _record(st: GroupPositions, member_id: str, members, topics: PositionTopics
                ) -> set[TopicPartitionKey]:
        """Reported positions and the member's interest (replacing its previous one)."""
        wanted: set[TopicPartitionKey] = set()
        for topic, parts in topics:
            for partition, need_position, position in parts:
                if position >= 0:
                    st.report((topic, partition), position)
                if need_position:
                    wanted.add((topic, partition))
        st.interest[member_id] = wanted
        for m in [m for m in st.interest if m not in members]:
            del st.interest[m]
        return wanted

    def _answer(self, offsets_holder: ClassicGroup | None, st: GroupPositions, member_id: str,
                wanted: set[TopicPartitionKey], owned: set[TopicPartitionKey]) -> PositionTopics:
        out: dict[str, dict[int, tuple[int, bool, int]]] = {}
        for topic, partition in sorted(wanted):
            out.setdefault(topic, {})[partition] = (
                partition, False, self.group_position(offsets_holder, st, (topic, partition)))
        others = sorted(m for m in st.interest if m != member_id)
        for tp in sorted(owned):
            if st.interested(tp, others):
                topic, partition = tp
                _, _, pos = out.setdefault(topic, {}).get(partition, (partition, False, -1))
                out[topic][partition] = (partition, True, pos)
        return [(t, [out[t][p] for p in sorted(out[t])]) for t in sorted(out)]
