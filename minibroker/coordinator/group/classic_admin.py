"""The administration side of classic groups, apart from their membership protocol
(classic_coordinator): DescribeGroups, ListGroups and DeleteGroups (which covers KIP-848 consumer
groups too: their offsets live in an Empty holder group of shard.groups), and how a failed group
record write is answered (Kafka's GroupMetadataManager: NOT_LEADER -> NOT_COORDINATOR, not enough
replicas -> COORDINATOR_NOT_AVAILABLE, timeout -> REBALANCE_IN_PROGRESS, too large ->
UNKNOWN_SERVER_ERROR)."""
from __future__ import annotations

import asyncio

import kafka.errors as Errors

from minibroker.coordinator.context import CoordinatorPart, group_shard
from minibroker.coordinator.errors import (
    COMMON_WRITE_ERRORS, GROUP_ID_NOT_FOUND, INVALID_GROUP_ID, NON_EMPTY_GROUP, NONE,
    REBALANCE_IN_PROGRESS)
from minibroker.coordinator.group.classic_group import DEAD, EMPTY, STABLE
from minibroker.coordinator.group.classic_group_records import group_tombstone, offset_tombstone
from minibroker.coordinator.replay import replay_all
from minibroker.coordinator.shard import Shard

_GROUP_WRITE_ERRORS = {
    **COMMON_WRITE_ERRORS,
    Errors.RequestTimedOutError.errno: REBALANCE_IN_PROGRESS,
    Errors.MessageSizeTooLargeError.errno: Errors.UnknownError.errno,
    Errors.RecordListTooLargeError.errno: Errors.UnknownError.errno,
}


class ClassicGroupAdmin(CoordinatorPart):
    @staticmethod
    def _group_write_error(code: int) -> int:
        return _GROUP_WRITE_ERRORS.get(code, code)

    # ================================================================== DescribeGroups / ListGroups
    def describe_group(self, group_id: str) -> tuple[int, str, str, str, list]:
        """(error, state, protocol_type, protocol_data, members) with members as
        (member_id, group_instance_id, client_id, client_host, metadata, assignment)."""
        shard, code = group_shard(self.rt, group_id)
        if code:
            return code, "", "", "", []
        group = shard.groups.get(group_id)
        if group is None or group.is_(DEAD) or group_id in shard.consumer_groups:
            return NONE, DEAD, "", "", []    # a consumer group: Kafka's "not a classic group"
        if group.is_(STABLE):
            members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                        m.metadata(group.protocol_name), m.assignment)
                       for m in group.members.values()]
            return NONE, group.state, group.protocol_type or "", group.protocol_name, members
        members = [(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                   for m in group.members.values()]
        return NONE, group.state, group.protocol_type or "", "", members

    def list_groups(self, states: list[str] | None, types: list[str] | None
                    ) -> tuple[int, list[tuple[str, str, str]]]:
        """(error, [(group_id, protocol_type, state)]), sorted by group id."""
        wanted_states = {s.lower() for s in states or ()}
        wanted_types = {t.lower() for t in types or ()}
        code = NONE
        out = []
        for shard in self.rt.shards_in_order():
            if shard.loading:
                code = Errors.CoordinatorLoadInProgressError.errno
                continue
            if wanted_types and "classic" not in wanted_types:
                continue
            for gid in sorted(shard.groups):
                g = shard.groups[gid]
                if gid in shard.consumer_groups:        # listed by the consumer coordinator
                    continue
                if g.is_(DEAD) or (wanted_states and g.state.lower() not in wanted_states):
                    continue
                out.append((gid, g.protocol_type or "", g.state))
        out.sort()
        return code, out

    # ================================================================== DeleteGroups
    def delete_groups(self, group_ids: list[str]) -> asyncio.Future:
        """A future of [(group_id, error)] in request order. Classic and KIP-848 consumer groups
        (Kafka's GroupCoordinatorShard.deleteGroups: validate by the group's type, then
        tombstones for its offsets, then for its group records)."""
        results: list[list] = []
        writes: dict[int, tuple["Shard", list]] = {}
        for gid in group_ids:
            entry = [gid, NONE, None]
            results.append(entry)
            if not gid:
                entry[1] = INVALID_GROUP_ID
                continue
            shard, code = self.rt.shard_for(gid)
            if code:
                entry[1] = code
                continue
            group = shard.groups.get(gid)     # a classic group, or a consumer group's offsets
            code = self.rt.consumer.validate_delete_group(shard, gid)
            is_consumer = code is not None
            if not is_consumer:
                code = GROUP_ID_NOT_FOUND if group is None or group.is_(DEAD) else \
                    NON_EMPTY_GROUP if not group.is_(EMPTY) else NONE
            if code:
                entry[1] = code
                continue
            records = []
            if group is not None:
                records = [offset_tombstone(gid, t, p) for t, p in sorted(group.offsets)]
                # A consumer group's holder has a classic record only if the id was classic once.
                if not is_consumer or group.generation_id > 0:
                    records.append(group_tombstone(gid))
                replay_all(shard, records)
                if shard.groups.get(gid) is group:      # nothing stored to tombstone
                    group.cancel_timers()
                    group.state = DEAD
                    del shard.groups[gid]
            if is_consumer:
                records += self.rt.consumer.delete_group(shard, gid)
            writes.setdefault(shard.partition, (shard, []))[1].extend(records)
            entry[2] = shard.partition
        fut = asyncio.get_running_loop().create_future()
        pending = {pid: self.rt.append(shard, recs, None) for pid, (shard, recs) in writes.items()}

        def finish(_=None) -> None:
            if fut.done() or not all(f.done() for f in pending.values()):
                return
            out = []
            for gid, code, pid in results:
                if pid is not None and pending[pid].result():
                    code = self._group_write_error(pending[pid].result())
                out.append((gid, code))
            fut.set_result(out)
        for f in pending.values():
            f.add_done_callback(finish)
        finish()
        return fut
