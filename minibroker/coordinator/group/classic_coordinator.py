"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup — Kafka's
GroupCoordinator. SyncGroup is classic_sync.ClassicGroupSync's; DescribeGroups, ListGroups and
DeleteGroups come from classic_admin.ClassicGroupAdmin below it, with how a failed group record
write is answered.

Every method is a plain `def` that validates, changes state and arms timers, then returns either a
value or a future the handler awaits (a rebalance barrier, or a write reaching the high
watermark). Timers are `loop.call_later` on the event loop's clock, so tests on virtual time run
session and rebalance timeouts instantly. Per-state decisions follow asyncpg's naming:
`_on_join__preparing_rebalance` and so on.

Decisions (Kafka's behaviour unless said):
- Member ids: `<client_id or group_instance_id>-<uuid>` from the broker's seeded IdSource.
- JoinGroup v4+ without a member id: MEMBER_ID_REQUIRED with a fresh id; the id is pending until
  the member rejoins with it (or its session timeout expires).
- Protocol metadata larger than the coordinator topic's max.message.bytes (sum over a member's
  protocols) is refused at JoinGroup with INVALID_REQUEST: the group record could never be written,
  and Kafka would only find out at the leader's SyncGroup (failing every member with
  UNKNOWN_SERVER_ERROR). INVALID_REQUEST is fatal for every client, which is what we want.
- What a group stores changes through replay (minibroker.coordinator.replay) of the records
  written: the leader's SyncGroup record (assignments, Stable) once stored, the Empty generation,
  group tombstones. The rebalance in between (members joining, the generation being formed) is
  in memory only, as in Kafka.
- Committed offsets: minibroker.coordinator.offset_manager.
"""
from __future__ import annotations

import asyncio
import logging

from minibroker.coordinator.context import group_shard
from minibroker.coordinator.errors import (
    COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL, INVALID_REQUEST, INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED, NONE, NOT_COORDINATOR, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID)
from minibroker.coordinator.group.classic_group import (
    COMPLETING_REBALANCE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE, ClassicGroup,
    ClassicGroupMember, JoinResult, SyncResult)
from minibroker.coordinator.group.classic_sync import ClassicGroupSync, snake
from minibroker.coordinator.group.classic_group_records import (
    empty_generation_record, group_metadata_record)
from minibroker.coordinator.offsets import OFFSETS_TOPIC
from minibroker.coordinator.replay import replay_all


log = logging.getLogger("minibroker.coordinator")


NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000      # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


class ClassicGroupCoordinator(ClassicGroupSync):
    # ================================================================== JoinGroup
    def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, client_id: str, client_host: str,
                   rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], reason: str | None = None,
                   supports_skip_assignment: bool = False) -> asyncio.Future:
        """A future of JoinResult, completed when the rebalance completes (or at once on error).
        supports_skip_assignment: JoinGroup v9+ (KIP-814)."""
        fut = asyncio.get_running_loop().create_future()
        shard, code = group_shard(self.rt, group_id)
        if code:
            fut.set_result(JoinResult(code, member_id))
            return fut
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            fut.set_result(JoinResult(INVALID_SESSION_TIMEOUT, member_id))
            return fut
        if sum(len(meta) for _, meta in protocols) > self.rt.max_record_bytes:
            fut.set_result(JoinResult(INVALID_REQUEST, member_id))
            return fut
        if rebalance_timeout_ms < 0:           # JoinGroup v0: the session timeout
            rebalance_timeout_ms = session_timeout_ms
        is_unknown = member_id == ""
        if group_id in shard.consumer_groups:          # a KIP-848 group (no online migration)
            fut.set_result(JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id))
            return fut
        group = shard.groups.get(group_id)
        if group is None:
            if not is_unknown:
                fut.set_result(JoinResult(UNKNOWN_MEMBER_ID, member_id))
                return fut
            group = shard.groups[group_id] = ClassicGroup(group_id, EMPTY, self.now_ms)
        args = (member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, list(protocols), reason)
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member_and_update_group(shard, group, member)
            fut.set_result(JoinResult(GROUP_MAX_SIZE_REACHED, ""))
        elif is_unknown:
            self._do_new_member_join(shard, group, fut, (require_known_member_id,
                                                         supports_skip_assignment), *args)
        else:
            self._do_current_member_join(shard, group, fut, *args)
        if group.is_(PREPARING_REBALANCE):
            self._try_complete_join(shard, group)
        self.maybe_forget(shard, group)
        return fut

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        max_size = self.config.group_max_size
        if group.state in (EMPTY, DEAD):
            return True
        if group.is_(PREPARING_REBALANCE):
            m = group.members.get(member_id)
            return (m is not None and m.is_awaiting_join) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    @staticmethod
    def _refused_join(group: ClassicGroup, protocol_type: str,
                      protocols: list[tuple[str, bytes]]) -> int:
        """Why any join is refused: a dead group, or protocols the group cannot use."""
        if group.is_(DEAD):
            return COORDINATOR_NOT_AVAILABLE
        if not group.supports_protocols(protocol_type, protocols):
            return INCONSISTENT_GROUP_PROTOCOL
        return NONE

    def _do_new_member_join(self, shard, group, fut, flags, member_id,
                            group_instance_id, client_id, client_host, rebalance_timeout_ms,
                            session_timeout_ms, protocol_type, protocols, reason) -> None:
        code = self._refused_join(group, protocol_type, protocols)
        if code:
            fut.set_result(JoinResult(code, member_id))
            return
        require_known_member_id, supports_skip = flags
        new_id = self.rt.ids.member_id(group_instance_id or client_id)
        if group_instance_id is not None:
            self._do_static_new_member_join(shard, group, fut, supports_skip, new_id,
                                            group_instance_id,
                                            client_id, client_host, rebalance_timeout_ms,
                                            session_timeout_ms, protocol_type, protocols, reason)
        elif require_known_member_id:
            group.pending_members[new_id] = self.rt.call_later(
                session_timeout_ms, self._on_expire_pending_member, shard, group, new_id)
            fut.set_result(JoinResult(MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(shard, group, fut, new_id, None, client_id, client_host,
                                           rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                           protocols, reason)

    def _do_static_new_member_join(self, shard, group, fut, supports_skip, new_id,
                                   group_instance_id, client_id,
                                   client_host, rebalance_timeout_ms, session_timeout_ms,
                                   protocol_type, protocols, reason) -> None:
        old_id = group.static_member_id(group_instance_id)
        if old_id is None:
            self._add_member_and_rebalance(shard, group, fut, new_id, group_instance_id, client_id,
                                           client_host, rebalance_timeout_ms, session_timeout_ms,
                                           protocol_type, protocols, reason)
            return
        # Kafka's updateStaticMemberThenRebalanceOrCompleteJoin.
        old_leader = group.leader_id
        member = group.replace_static_member(group_instance_id, old_id, new_id, FENCED_INSTANCE_ID)
        self._complete_and_schedule_heartbeat(shard, group, member)
        old = (member.supported_protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_future = fut
        if group.is_(STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(shard, group, f"static member {new_id} changed protocols")
                return
            generation = group.generation_id

            def stored(code: int) -> None:
                if not self._is_current(shard, group) or group.members.get(new_id) is not member:
                    return
                if code:
                    member.supported_protocols, member.rebalance_timeout_ms, \
                        member.session_timeout_ms = old
                    back = group.replace_static_member(group_instance_id, new_id, old_id,
                                                       FENCED_INSTANCE_ID)
                    self._complete_and_schedule_heartbeat(shard, group, back)
                    fut.done() or fut.set_result(JoinResult(
                        self._group_write_error(code), "", generation, group.protocol_type,
                        group.protocol_name, old_leader or ""))
                    return
                is_leader = group.is_leader(new_id)
                if supports_skip:
                    result = JoinResult(NONE, new_id, group.generation_id, group.protocol_type,
                                        group.protocol_name, group.leader_id or "",
                                        self._member_metadata(group) if is_leader else [],
                                        skip_assignment=is_leader)
                else:
                    result = JoinResult(NONE, new_id, group.generation_id, group.protocol_type,
                                        group.protocol_name, old_leader or "")
                member.complete_join(result)
            self.rt.append(shard, [group_metadata_record(group)], stored)
        elif group.is_(COMPLETING_REBALANCE):
            self._prepare_rebalance(shard, group, f"static member {new_id} replaced {old_id}")
        # PreparingRebalance: the member waits for the rebalance like everyone else.

    def _do_current_member_join(self, shard, group, fut, member_id, group_instance_id, client_id,
                                client_host, rebalance_timeout_ms, session_timeout_ms,
                                protocol_type, protocols, reason) -> None:
        code = self._refused_join(group, protocol_type, protocols)
        if code:
            fut.set_result(JoinResult(code, member_id))
            return
        if member_id in group.pending_members:
            self._add_member_and_rebalance(shard, group, fut, member_id, group_instance_id,
                                           client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, reason)
            return
        code = self._validate_current_member(group, member_id, group_instance_id)
        if code:
            fut.set_result(JoinResult(code, member_id))
            return
        member = group.members[member_id]
        getattr(self, f"_on_join__{snake(group.state)}")(
            shard, group, member, fut, protocols, rebalance_timeout_ms, session_timeout_ms, reason)

    def _on_join__preparing_rebalance(self, shard, group, member, fut, protocols,
                                      rebalance_timeout_ms, session_timeout_ms, reason) -> None:
        self._update_member_and_rebalance(shard, group, member, fut, protocols,
                                          rebalance_timeout_ms, session_timeout_ms, reason)

    def _on_join__completing_rebalance(self, shard, group, member, fut, protocols,
                                       rebalance_timeout_ms, session_timeout_ms, reason) -> None:
        if member.matches(protocols):
            # The member did not get its JoinGroup response: answer with the current generation.
            fut.set_result(self._join_result(group, member))
        else:
            self._update_member_and_rebalance(shard, group, member, fut, protocols,
                                              rebalance_timeout_ms, session_timeout_ms, reason)

    def _on_join__stable(self, shard, group, member, fut, protocols, rebalance_timeout_ms,
                         session_timeout_ms, reason) -> None:
        if group.is_leader(member.member_id) or not member.matches(protocols):
            # The leader rejoining forces a rebalance (it may have seen metadata change).
            self._update_member_and_rebalance(shard, group, member, fut, protocols,
                                              rebalance_timeout_ms, session_timeout_ms, reason)
        else:
            fut.set_result(JoinResult(NONE, member.member_id, group.generation_id,
                                      group.protocol_type, group.protocol_name,
                                      group.leader_id or ""))

    def _on_join__empty(self, shard, group, member, fut, *_args) -> None:
        fut.set_result(JoinResult(UNKNOWN_MEMBER_ID, member.member_id))

    _on_join__dead = _on_join__empty

    def _add_member_and_rebalance(self, shard, group, fut, member_id, group_instance_id,
                                  client_id, client_host, rebalance_timeout_ms,
                                  session_timeout_ms, protocol_type, protocols, reason) -> None:
        member = ClassicGroupMember(member_id, group_instance_id, client_id, client_host,
                                    rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                    protocols)
        member.is_new = True
        if group.is_(PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, fut)
        self._complete_and_schedule_heartbeat(shard, group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        handle = group.pending_members.pop(member_id, None)
        if handle is not None:
            handle.cancel()
        self._maybe_prepare_rebalance(shard, group, reason or f"{member_id} joined")

    def _update_member_and_rebalance(self, shard, group, member, fut, protocols,
                                     rebalance_timeout_ms, session_timeout_ms, reason) -> None:
        if member.join_future is not None and member.join_future is not fut:
            member.complete_join(JoinResult(REBALANCE_IN_PROGRESS, member.member_id))
        member.supported_protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.join_future = fut
        self._maybe_prepare_rebalance(shard, group, reason or f"{member.member_id} rejoined")

    def _join_result(self, group: ClassicGroup, member: ClassicGroupMember) -> JoinResult:
        leader = group.is_leader(member.member_id)
        return JoinResult(NONE, member.member_id, group.generation_id, group.protocol_type,
                          group.protocol_name, group.leader_id or "",
                          self._member_metadata(group) if leader else [])

    @staticmethod
    def _member_metadata(group: ClassicGroup) -> list[tuple[str, str | None, bytes]]:
        return [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                for m in group.members.values()]

    # ------------------------------------------------------------------ rebalance
    def _maybe_prepare_rebalance(self, shard, group, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(shard, group, reason)

    def _prepare_rebalance(self, shard, group, reason: str) -> None:
        # Kafka's INFO line for every rebalance (joins, leaves, expirations, metadata changes).
        log.info("Preparing to rebalance group %s in state PreparingRebalance with old generation "
                 "%d (%s-%d) (reason: %s)", group.group_id, group.generation_id, OFFSETS_TOPIC,
                 shard.partition, reason)
        if group.is_(COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(shard, group, REBALANCE_IN_PROGRESS)
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        initial = group.is_(EMPTY)
        group.transition_to(PREPARING_REBALANCE, self.now_ms)
        if group.join_timer is not None:
            group.join_timer.cancel()
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_initial_delay = (delay, remaining)
            group.join_timer = self.rt.call_later(delay, self._on_initial_delay_expired, shard, group)
        else:
            group.join_initial_delay = None
            group.join_timer = self.rt.call_later(group.rebalance_timeout_ms(),
                                                  self._on_join_timeout, shard, group)
            self._try_complete_join(shard, group)     # Kafka's tryCompleteElseWatch

    def _try_complete_join(self, shard, group) -> None:
        if (group.is_(PREPARING_REBALANCE) and group.join_initial_delay is None
                and group.has_all_members_joined()):
            self._on_complete_join(shard, group)

    def _on_initial_delay_expired(self, shard, group) -> None:
        if not self._is_current(shard, group) or not group.is_(PREPARING_REBALANCE):
            return
        delay, remaining = group.join_initial_delay
        if group.new_member_added and remaining != 0:
            group.new_member_added = False
            next_delay = min(self.config.group_initial_rebalance_delay_ms, remaining)
            group.join_initial_delay = (next_delay, max(remaining - delay, 0))
            group.join_timer = self.rt.call_later(next_delay, self._on_initial_delay_expired,
                                                  shard, group)
            return
        self._on_complete_join(shard, group)

    def _on_join_timeout(self, shard, group) -> None:
        if self._is_current(shard, group) and group.is_(PREPARING_REBALANCE):
            self._on_complete_join(shard, group)

    def _on_complete_join(self, shard, group) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        group.join_initial_delay = None
        group.new_member_added = False
        for m in group.not_yet_rejoined_members():
            if not m.is_static:
                group.remove(m.member_id)
        if group.is_(DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait another rebalance timeout.
            group.join_timer = self.rt.call_later(group.rebalance_timeout_ms(),
                                                  self._on_join_timeout, shard, group)
            return
        if not group.members:
            # The next generation is Empty: stored, and applied through replay.
            self.rt.append(shard, replay_all(shard, [empty_generation_record(group, self.now_ms)]),
                           None)
            self.maybe_forget(shard, group)
            return
        group.init_next_generation(self.now_ms)
        for m in list(group.members.values()):
            m.complete_join(self._join_result(group, m))
            self._complete_and_schedule_heartbeat(shard, group, m)
            m.is_new = False
        generation = group.generation_id
        group.sync_timer = self.rt.call_later(group.rebalance_timeout_ms(),
                                              self._on_expire_pending_sync, shard, group,
                                              generation)

    def _on_expire_pending_sync(self, shard, group, generation: int) -> None:
        if not self._is_current(shard, group) or generation != group.generation_id:
            return
        group.sync_timer = None
        if group.state in (COMPLETING_REBALANCE, STABLE) and group.pending_sync_members:
            for member_id in sorted(group.pending_sync_members):
                m = group.members.get(member_id)
                if m is not None:
                    m.complete_sync(SyncResult(UNKNOWN_MEMBER_ID))
                    group.remove(member_id)
            group.pending_sync_members.clear()
            self._maybe_prepare_rebalance(shard, group, "members did not sync in time")

    def _reset_and_propagate_assignment_error(self, shard, group, code: int) -> None:
        for m in group.members.values():
            m.assignment = b""
            if m.is_awaiting_sync:
                m.complete_sync(SyncResult(code))
                self._complete_and_schedule_heartbeat(shard, group, m)

    # ------------------------------------------------------------------ members leaving
    def _remove_member_and_update_group(self, shard, group, member, reason: str = "") -> None:
        member.complete_join(JoinResult(UNKNOWN_MEMBER_ID, member.member_id))
        member.complete_sync(SyncResult(UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(shard, group, reason or f"{member.member_id} left")
        elif group.is_(PREPARING_REBALANCE):
            self._try_complete_join(shard, group)

    def _on_expire_pending_member(self, shard, group, member_id: str) -> None:
        if not self._is_current(shard, group) or member_id not in group.pending_members:
            return
        del group.pending_members[member_id]
        if group.is_(PREPARING_REBALANCE):
            self._try_complete_join(shard, group)
        self.maybe_forget(shard, group)

    def _complete_and_schedule_heartbeat(self, shard, group, member,
                                         timeout_ms: int | None = None) -> None:
        member.cancel_heartbeat()
        member.heartbeat_satisfied = False
        member.heartbeat_timer = self.rt.call_later(
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            self._on_expire_heartbeat, shard, group, member)

    def _on_expire_heartbeat(self, shard, group, member) -> None:
        member.heartbeat_timer = None
        if not self._is_current(shard, group) or group.members.get(member.member_id) is not member:
            return
        if not member.has_satisfied_heartbeat():
            self._remove_member_and_update_group(shard, group, member, "session timeout")

    def _validate_current_member(self, group, member_id: str,
                                 group_instance_id: str | None) -> int:
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is None:
                return UNKNOWN_MEMBER_ID
            if current != member_id:
                return FENCED_INSTANCE_ID
        if member_id not in group.members:
            return UNKNOWN_MEMBER_ID
        return NONE

    def _is_current(self, shard, group) -> bool:
        return self.rt.is_active(shard) and shard.groups.get(group.group_id) is group

    def maybe_forget(self, shard, group) -> None:
        """Drop a group that holds nothing (created by a join that failed, all members gone
        before a first generation): Kafka keeps it until the next expiration run."""
        if (group.is_(EMPTY) and not group.members and not group.pending_members
                and not group.offsets and group.generation_id == 0
                and shard.groups.get(group.group_id) is group):
            group.cancel_timers()
            del shard.groups[group.group_id]

    # ================================================================== Heartbeat
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> int:
        shard, code = group_shard(self.rt, group_id)
        if code:
            return code
        group = shard.groups.get(group_id)
        if group is None:
            return UNKNOWN_MEMBER_ID
        if group.is_(DEAD):
            return COORDINATOR_NOT_AVAILABLE
        code = self._validate_current_member(group, member_id, group_instance_id)
        if code:
            return code
        if generation_id != group.generation_id:
            return ILLEGAL_GENERATION
        if group.is_(EMPTY):
            return UNKNOWN_MEMBER_ID
        self._complete_and_schedule_heartbeat(shard, group, group.members[member_id])
        return REBALANCE_IN_PROGRESS if group.is_(PREPARING_REBALANCE) else NONE

    # ================================================================== LeaveGroup
    def leave_group(self, group_id: str, members: list[tuple[str, str | None, str | None]]
                    ) -> tuple[int, list[int]]:
        """members: (member_id, group_instance_id, reason). Returns (error, per-member errors)."""
        shard, code = group_shard(self.rt, group_id)
        if code:
            return code, []
        group = shard.groups.get(group_id)
        if group is None:
            return NONE, [UNKNOWN_MEMBER_ID] * len(members)
        if group.is_(DEAD):
            return COORDINATOR_NOT_AVAILABLE, []
        codes = []
        for member_id, instance_id, reason in members:
            if member_id == "" and instance_id is not None:
                member_id = group.static_member_id(instance_id) or ""
            if member_id in group.pending_members:
                handle = group.pending_members.pop(member_id)
                if handle is not None:
                    handle.cancel()
                if group.is_(PREPARING_REBALANCE):
                    self._try_complete_join(shard, group)
                codes.append(NONE)
                continue
            code = self._validate_current_member(group, member_id, instance_id)
            if code:
                codes.append(code)
                continue
            self._remove_member_and_update_group(shard, group, group.members[member_id],
                                                 reason or f"{member_id} left")
            codes.append(NONE)
        self.maybe_forget(shard, group)
        return NONE, codes

    # ================================================================== OffsetCommit (validation)
    def validate_offset_commit(self, shard, group_id: str, generation_id: int, member_id: str,
                               group_instance_id: str | None) -> tuple[ClassicGroup | None, int]:
        """(group, 0) when a classic member (or a standalone committer: generation < 0 on an Empty
        or new group) may commit offsets, which counts as its heartbeat; else (None, error)."""
        group = shard.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return None, ILLEGAL_GENERATION
            group = shard.groups[group_id] = ClassicGroup(group_id, EMPTY, self.now_ms)
        if group.is_(DEAD):
            return None, COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(group_instance_id, member_id):
            return None, FENCED_INSTANCE_ID
        if not (generation_id < 0 and group.is_(EMPTY)):
            if group.is_(COMPLETING_REBALANCE):
                return None, REBALANCE_IN_PROGRESS
            if member_id not in group.members:
                return None, UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return None, ILLEGAL_GENERATION
            self._complete_and_schedule_heartbeat(shard, group, group.members[member_id])
        return group, NONE

    # ================================================================== loading / unloading
    def on_loaded(self, shard) -> None:
        """After replay: members of loaded groups must heartbeat within their session timeout."""
        for gid in sorted(shard.groups):
            group = shard.groups[gid]
            for m in group.members.values():
                self._complete_and_schedule_heartbeat(shard, group, m)

    def on_unloaded(self, shard) -> None:
        for gid in sorted(shard.groups):
            group = shard.groups[gid]
            group.cancel_timers()
            for m in group.members.values():
                m.complete_join(JoinResult(NOT_COORDINATOR, m.member_id))
                m.complete_sync(SyncResult(NOT_COORDINATOR))
            group.state = DEAD
        shard.groups.clear()
