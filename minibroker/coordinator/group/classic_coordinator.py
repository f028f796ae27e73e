"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups,
ListGroups, DeleteGroups — Kafka's GroupCoordinator.

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
- A group record that cannot be appended maps like Kafka's GroupMetadataManager: NOT_LEADER →
  NOT_COORDINATOR, not enough replicas → COORDINATOR_NOT_AVAILABLE, timeout → REBALANCE_IN_PROGRESS,
  too large → UNKNOWN_SERVER_ERROR.
- What a group stores changes through replay (minibroker.coordinator.replay) of the records
  written: the leader's SyncGroup record (assignments, Stable) once stored, the Empty generation,
  group tombstones. The rebalance in between (members joining, the generation being formed) is
  in memory only, as in Kafka.
- DeleteGroups covers KIP-848 consumer groups too: their offsets live in an Empty holder group of
  shard.groups. Committed offsets: minibroker.coordinator.offset_manager.
"""
from __future__ import annotations

import asyncio
import logging

import kafka.errors as Errors

from minibroker.coordinator.context import CoordinatorPart
from minibroker.coordinator.errors import (
    COMMON_WRITE_ERRORS, COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, GROUP_ID_NOT_FOUND,
    GROUP_MAX_SIZE_REACHED, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL, INVALID_GROUP_ID,
    INVALID_REQUEST, INVALID_SESSION_TIMEOUT, MEMBER_ID_REQUIRED, NONE, NON_EMPTY_GROUP,
    NOT_COORDINATOR, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID)
from minibroker.coordinator.group.classic_group import (
    COMPLETING_REBALANCE, CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY, PREPARING_REBALANCE, STABLE,
    ClassicGroup, ClassicGroupMember, JoinResult, OffsetAndMetadata, SyncResult)
from minibroker.coordinator.group.classic_group_records import (
    empty_generation_record, group_metadata_record, group_tombstone, offset_tombstone)
from minibroker.coordinator.offsets import OFFSETS_TOPIC
from minibroker.coordinator.replay import replay_all
from minibroker.coordinator.shard import Shard


log = logging.getLogger("minibroker.coordinator")


NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000      # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs


class ClassicGroupCoordinator(CoordinatorPart):

    # ================================================================== JoinGroup
    def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                   require_known_member_id: bool, client_id: str, client_host: str,
                   rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], reason: str | None = None,
                   supports_skip_assignment: bool = False) -> asyncio.Future:
        """A future of JoinResult, completed when the rebalance completes (or at once on error).
        supports_skip_assignment: JoinGroup v9+ (KIP-814)."""
        fut = asyncio.get_running_loop().create_future()
        if not group_id:
            fut.set_result(JoinResult(INVALID_GROUP_ID, member_id))
            return fut
        shard, code = self.rt.shard_for(group_id)
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
        getattr(self, f"_on_join__{_snake(group.state)}")(
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

    # ================================================================== SyncGroup
    def sync_group(self, group_id: str, generation_id: int, member_id: str,
                   group_instance_id: str | None, protocol_type: str | None,
                   protocol_name: str | None, assignments: list[tuple[str, bytes]]) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        if not group_id:
            fut.set_result(SyncResult(INVALID_GROUP_ID))
            return fut
        shard, code = self.rt.shard_for(group_id)
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
        getattr(self, f"_on_sync__{_snake(group.state)}")(shard, group, group.members[member_id],
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

    # ================================================================== Heartbeat
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> int:
        if not group_id:
            return INVALID_GROUP_ID
        shard, code = self.rt.shard_for(group_id)
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
        if not group_id:
            return INVALID_GROUP_ID, []
        shard, code = self.rt.shard_for(group_id)
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

    # ================================================================== DescribeGroups / ListGroups
    def describe_group(self, group_id: str) -> tuple[int, str, str, str, list]:
        """(error, state, protocol_type, protocol_data, members) with members as
        (member_id, group_instance_id, client_id, client_host, metadata, assignment)."""
        if not group_id:
            return INVALID_GROUP_ID, "", "", "", []
        shard, code = self.rt.shard_for(group_id)
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

    # ================================================================== write errors
    @staticmethod
    def _group_write_error(code: int) -> int:
        return _GROUP_WRITE_ERRORS.get(code, code)


_GROUP_WRITE_ERRORS = {
    **COMMON_WRITE_ERRORS,
    Errors.RequestTimedOutError.errno: REBALANCE_IN_PROGRESS,
    Errors.MessageSizeTooLargeError.errno: Errors.UnknownError.errno,
    Errors.RecordListTooLargeError.errno: Errors.UnknownError.errno,
}

def _snake(state: str) -> str:
    out = []
    for ch in state:
        if ch.isupper() and out:
            out.append("_")
        out.append(ch.lower())
    return "".join(out)
