"""SyncGroup of the classic group protocol (Kafka's GroupCoordinator.handleSyncGroup), one state
at a time: the leader's assignments are written as the group's record and every member waiting
gets its own once stored. The membership helpers it calls (_validate_current_member,
_maybe_prepare_rebalance, ...) are ClassicGroupCoordinator's, the class built on this one
(classic_coordinator.py).
"""
from __future__ import annotations

import asyncio
import logging

from minibroker.coordinator.context import group_shard
from minibroker.coordinator.errors import (
    COORDINATOR_NOT_AVAILABLE, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL,
    NONE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID)
from minibroker.coordinator.group.classic_admin import ClassicGroupAdmin
from minibroker.coordinator.group.classic_group import COMPLETING_REBALANCE, DEAD, SyncResult
from minibroker.coordinator.group.classic_group_records import group_metadata_record
from minibroker.coordinator.offsets import OFFSETS_TOPIC
from minibroker.coordinator.replay import replay_all

log = logging.getLogger("minibroker.coordinator")


def snake(state: str) -> str:
    """A group state as the suffix of its per-state methods: "PreparingRebalance" ->
    "preparing_rebalance" (_on_join__preparing_rebalance, _on_sync__...)."""
    out = []
    for ch in state:
        if ch.isupper() and out:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


class ClassicGroupSync(ClassicGroupAdmin):
    # ================================================================== SyncGroup
    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: list[tuple[str, bytes]]) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        shard, code = group_shard(self.rt, group_id)
        if code:
            fut.set_result(SyncResult(code))
            return fut
        group = shard.groups.get(group_id)
        if group is None:
            fut.set_result(SyncResult(UNKNOWN_MEMBER_ID))
            return fut
        if group.is_(DEAD):
            fut.set_result(SyncResult(COORDINATOR_NOT_AVAILABLE))
            return fut
        code = self._validate_current_member(group, member_id, group_instance_id)
        if not code and generation_id != group.generation_id:
            code = ILLEGAL_GENERATION
        if not code and protocol_type is not None and protocol_type != group.protocol_type:
            code = INCONSISTENT_GROUP_PROTOCOL
        if not code and protocol_name is not None and protocol_name != group.protocol_name:
            code = INCONSISTENT_GROUP_PROTOCOL
        if code:
            fut.set_result(SyncResult(code))
            return fut
        getattr(self, f"_on_sync__{snake(group.state)}")(shard, group, group.members[member_id],
                                                          fut, assignments)
        return fut

    def _on_sync__empty(self, shard, group, member, fut, assignments) -> None:
        fut.set_result(SyncResult(UNKNOWN_MEMBER_ID))

    def _on_sync__preparing_rebalance(self, shard, group, member, fut, assignments) -> None:
        fut.set_result(SyncResult(REBALANCE_IN_PROGRESS))

    def _on_sync__completing_rebalance(self, shard, group, member, fut, assignments) -> None:
        if member.sync_future is not None:
            member.complete_sync(SyncResult(REBALANCE_IN_PROGRESS))
        member.sync_future = fut
        self._remove_pending_sync_member(group, member.member_id)
        if not group.is_leader(member.member_id):
            return
        given = {mid: bytes(a) for mid, a in assignments}
        assignment = {mid: given.get(mid, b"") for mid in group.members}
        generation = group.generation_id

        def stored(code: int) -> None:
            if not self._is_current(shard, group):
                return
            if group.is_(COMPLETING_REBALANCE) and group.generation_id == generation:
                if code:
                    self._reset_and_propagate_assignment_error(shard, group,
                                                               self._group_write_error(code))
                    self._maybe_prepare_rebalance(shard, group, "storing the group failed")
                else:
                    # The stored record (assignments, Stable) applies through replay; in memory
                    # the group became Stable now (the record keeps CompletingRebalance's time).
                    replay_all(shard, [record])
                    group.current_state_timestamp = self.now_ms
                    log.info("Stabilized group %s generation %d (%s-%d) with %d members",
                             group.group_id, group.generation_id, OFFSETS_TOPIC, shard.partition,
                             len(group.members))
                    for m in group.members.values():
                        if m.is_awaiting_sync:
                            m.complete_sync(SyncResult(NONE, group.protocol_type,
                                                       group.protocol_name, m.assignment))
                            self._complete_and_schedule_heartbeat(shard, group, m)
        record = group_metadata_record(group, assignment)
        self.rt.append(shard, [record], stored)

    def _on_sync__stable(self, shard, group, member, fut, assignments) -> None:
        self._remove_pending_sync_member(group, member.member_id)
        fut.set_result(SyncResult(NONE, group.protocol_type, group.protocol_name,
                                  member.assignment))
        self._complete_and_schedule_heartbeat(shard, group, member)

    _on_sync__dead = _on_sync__empty

    def _remove_pending_sync_member(self, group, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
