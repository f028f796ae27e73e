"""KIP-848 consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe) with KIP-1101 hashes.

The group model is minibroker.coordinator.group.consumer_group, its records and `replay`
minibroker.coordinator.group.consumer_group_records.

Kafka's GroupMetadataManager.consumerGroupHeartbeat / ConsumerGroup / CurrentAssignmentBuilder,
on one broker's coordinator runtime (minibroker.coordinator.runtime):

- Epochs. The group epoch is bumped when a member joins, leaves or changes its subscription, and
  when the subscribed topics' MetadataHash changes. A bump makes the group "Assigning": the next
  heartbeat computes a new target assignment with the server-side assignor (assignment epoch :=
  group epoch). Each member then reconciles towards its target: partitions it must give up are
  "pending revocation" (member epoch unchanged, state UNREVOKED_PARTITIONS) until a heartbeat
  shows it no longer owns them; only then does it move to the assignment epoch. A partition
  another member still owns (current assignment or pending revocation) is not given to its new
  owner ("unreleased", state UNRELEASED_PARTITIONS) until the old owner released it.
- KIP-1101. One `TopicHashCache` per coordinator (all shards): filled lazily on heartbeats, a
  topic dropped when UpdateMetadata changes or deletes it (any field: a leader move too — the
  recomputed hash is then equal and nothing happens), the whole cache dropped when a broker's rack
  changes, and a topic dropped when no loaded group subscribes to it any more. Each heartbeat
  recomputes the group's hash over its subscribed existing topics and compares it with the stored
  `ConsumerGroupMetadataValue.MetadataHash`; a difference bumps the group epoch. Racks are those of
  registered brokers: a broker that is down keeps its last known rack (Kafka's cluster image keeps
  fenced brokers), so a restart bumps once, and only if the rack changed.
- Records. Every change is a coordinator record appended to the group's __consumer_offsets
  partition and applied by `replay` (the same function that loads a partition): member metadata,
  group epoch + MetadataHash, target assignment members + metadata, current member assignment;
  tombstones on removal. The deprecated ConsumerGroupPartitionMetadataValue is only replayed; the
  first heartbeat of a group that has one writes its tombstone (the seed's migration section).
- Fencing and timeouts on the event loop's clock: group.consumer.session.timeout.ms from the last
  heartbeat; a member that does not revoke within its rebalance timeout is fenced too.

Decisions:
- Records are replayed into memory when generated, before the write is acknowledged (Kafka
  replays them at once too, and reverts on a failed write; we do not revert: a failed write means
  the shard is being unloaded, or a timeout after which the client retries).
- A new target assignment is computed on the heartbeat that sees group epoch > assignment epoch
  (the bumping heartbeat itself, or the next one after a fence/leave), as Kafka 3.7.
- SubscribedTopicRegex uses Python `re.fullmatch` (RE2/J's common subset); internal topics never
  match. An invalid pattern is INVALID_REGULAR_EXPRESSION (Kafka's code 128).
- An epoch-0 heartbeat of a known dynamic member resets it (it owns nothing any more).
- A consumer group that becomes Empty stays (with its epoch) like Kafka's; its offsets live in the
  classic offset holder of shard.groups (OffsetCommit is checked against the member epoch).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import re

import kafka.errors as Errors

from minibroker.coordinator.context import CoordinatorContext, CoordinatorPart, completed
from minibroker.coordinator.errors import (
    COMMON_WRITE_ERRORS, COORDINATOR_NOT_AVAILABLE, FENCED_INSTANCE_ID, GROUP_ID_NOT_FOUND,
    INVALID_REGULAR_EXPRESSION, INVALID_REQUEST, NONE, NON_EMPTY_GROUP, STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID, UNSUPPORTED_ASSIGNOR)
from minibroker.coordinator.group.assignors import ASSIGNORS, MemberSpec, TopicDescription, assign
from minibroker.coordinator.group.consumer_group import (
    CONSUMER_GROUP_TYPE, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    UNREVOKED_PARTITIONS, Assignment, ConsumerGroup, ConsumerGroupMember, reconcile)
from minibroker.coordinator.group.consumer_group_records import (
    Record, assignment_of, topic_partitions_of, current_assignment_record,
    current_assignment_tombstone, group_epoch_record, group_epoch_tombstone,
    member_metadata_record, member_metadata_tombstone, partition_metadata_tombstone,
    target_member_record, target_member_tombstone, target_metadata_record,
    target_metadata_tombstone)
from minibroker.coordinator.group.consumer_members import (
    GroupError, member_for_heartbeat, updated_member)
from minibroker.coordinator.group.metadata_hash import TopicHashCache, compute_group_metadata_hash
from minibroker.coordinator.replay import replay_all
from minibroker.protocol.messages import (ConsumerGroupDescribeResponse,
                                          ConsumerGroupHeartbeatResponse)

log = logging.getLogger("minibroker.coordinator")

_WRITE_ERRORS = {
    **COMMON_WRITE_ERRORS,
    Errors.RequestTimedOutError.errno: COORDINATOR_NOT_AVAILABLE,
}


class ConsumerGroupCoordinator(CoordinatorPart):
    def __init__(self, rt: CoordinatorContext) -> None:
        super().__init__(rt)
        self.metadata = rt.metadata
        self.racks: dict[int, str | None] = {}          # broker id -> last registered rack
        self.topic_hashes = TopicHashCache(self._rack_of)
        self.subscribers: dict[str, int] = {}           # topic -> loaded groups subscribing
        self.hash_computations = 0
        self._on_brokers(list(self.metadata.brokers.values()))
        self.metadata.topic_listeners.append(self._on_topic)
        self.metadata.broker_listeners.append(self._on_brokers)

    # ================================================================== metadata (KIP-1101 cache)
    def _rack_of(self, broker_id: int) -> str | None:
        return self.racks.get(broker_id)

    def _on_brokers(self, brokers) -> None:
        changed = False
        for b in brokers:
            if self.racks.get(b.node_id) != b.rack:
                changed = True
            self.racks[b.node_id] = b.rack
        if changed:
            self.topic_hashes.clear()

    def _on_topic(self, name: str, old, new) -> None:
        if old != new:
            self.topic_hashes.invalidate(name)

    def _resolve(self, members) -> frozenset[str]:
        names: set[str] = set()
        regexes: set[str] = set()
        for m in members:
            names.update(m.subscribed_topic_names)
            if m.subscribed_topic_regex:
                regexes.add(m.subscribed_topic_regex)
        for rx in sorted(regexes):
            try:
                pattern = re.compile(rx)
            except re.error:
                continue
            names.update(t for t, info in self.metadata.topics.items()
                         if not info.is_internal and pattern.fullmatch(t))
        return frozenset(names)

    def _group_hash(self, subscribed: frozenset[str]) -> int:
        hashes = {}
        for name in sorted(subscribed):
            info = self.metadata.topics.get(name)
            if info is not None:
                if name not in self.topic_hashes:
                    self.hash_computations += 1
                hashes[name] = self.topic_hashes.get(name, info)
        return compute_group_metadata_hash(hashes)

    def _set_subscribed(self, group: ConsumerGroup, subscribed: frozenset[str]) -> None:
        """Keep the per-topic subscriber counts; a topic no group subscribes to leaves the cache."""
        for t in sorted(subscribed - group.subscribed_topics):
            self.subscribers[t] = self.subscribers.get(t, 0) + 1
        for t in sorted(group.subscribed_topics - subscribed):
            n = self.subscribers.get(t, 0) - 1
            if n <= 0:
                self.subscribers.pop(t, None)
                self.topic_hashes.invalidate(t)
            else:
                self.subscribers[t] = n
        group.subscribed_topics = subscribed

    def _topic_descriptions(self, subscribed: frozenset[str]) -> dict[str, TopicDescription]:
        out = {}
        for name in sorted(subscribed):
            info = self.metadata.topics.get(name)
            if info is None or not info.partitions:
                continue
            n = max(info.partitions) + 1
            racks = []
            for p in range(n):
                pi = info.partitions.get(p)
                replicas = pi.replicas if pi is not None else ()
                racks.append(frozenset(r for r in map(self._rack_of, replicas) if r is not None))
            out[name] = TopicDescription(info.topic_id, name, tuple(racks))
        return out

    # ================================================================== ConsumerGroupHeartbeat
    def heartbeat(self, req, api_version: int, client_id: str, client_host: str
                  ) -> asyncio.Future:
        """A future of ConsumerGroupHeartbeatResponse, resolved once its records are committed."""
        try:
            self._validate(req, api_version)
            shard, code = self.rt.shard_for(req.group_id)
            if code:
                raise GroupError(code)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response, records = self._leave(shard, req)
            else:
                response, records = self._join_or_update(shard, req, api_version, client_id,
                                                         client_host)
        except GroupError as e:
            return completed(ConsumerGroupHeartbeatResponse(
                throttle_time_ms=0, error_code=e.code, error_message=e.message, member_id=None,
                member_epoch=0, heartbeat_interval_ms=0, assignment=None))
        return self._write(shard, records, response)

    def _write(self, shard, records: list[Record], response):
        fut = asyncio.get_running_loop().create_future()
        if not records:
            fut.set_result(response)
            return fut
        write = self.rt.append(shard, records, None)

        def finish(w: asyncio.Future) -> None:
            code = w.result()
            if code:
                code = _WRITE_ERRORS.get(code, code)
                fut.set_result(ConsumerGroupHeartbeatResponse(
                    throttle_time_ms=0, error_code=code, error_message=None, member_id=None,
                    member_epoch=0, heartbeat_interval_ms=0, assignment=None)
                    if isinstance(response, ConsumerGroupHeartbeatResponse) else code)
            else:
                fut.set_result(response)
        write.add_done_callback(finish)
        return fut

    @staticmethod
    def _validate(req, api_version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
        if not req.group_id:
            raise GroupError(INVALID_REQUEST, "GroupId can't be empty.")
        if req.instance_id is not None and req.instance_id == "":
            raise GroupError(INVALID_REQUEST, "InstanceId can't be empty.")
        if req.rack_id is not None and req.rack_id == "":
            raise GroupError(INVALID_REQUEST, "RackId can't be empty.")
        if api_version >= 1 and not req.member_id:
            raise GroupError(INVALID_REQUEST, "MemberId can't be empty.")
        epoch = req.member_epoch
        if epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise GroupError(INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first "
                                                  "request.")
            if req.topic_partitions is None or len(req.topic_partitions):
                raise GroupError(INVALID_REQUEST, "TopicPartitions must be empty when (re-)"
                                                  "joining.")
            regex = req.subscribed_topic_regex if api_version >= 1 else None
            if req.subscribed_topic_names is None and not regex:
                raise GroupError(INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex "
                                                  "must be set in first request.")
        elif epoch > 0:
            if not req.member_id:
                raise GroupError(INVALID_REQUEST, "MemberId can't be empty.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise GroupError(INVALID_REQUEST, "InstanceId can't be null.")
            if not req.member_id:
                raise GroupError(INVALID_REQUEST, "MemberId can't be empty.")
        elif epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                raise GroupError(INVALID_REQUEST, "MemberId can't be empty.")
        else:
            raise GroupError(INVALID_REQUEST, f"MemberEpoch is invalid: {epoch}.")
        if req.server_assignor and req.server_assignor not in ASSIGNORS:
            raise GroupError(UNSUPPORTED_ASSIGNOR,
                             f"ServerAssignor {req.server_assignor} is not supported. Supported "
                             f"assignors: {', '.join(sorted(ASSIGNORS))}.")
        regex = req.subscribed_topic_regex if api_version >= 1 else None
        if regex:
            try:
                re.compile(regex)
            except re.error as e:
                raise GroupError(INVALID_REGULAR_EXPRESSION,
                                 f"SubscribedTopicRegex `{regex}` is not a valid regular "
                                 f"expression: {e}.") from None

    def _group_for_heartbeat(self, shard, group_id: str, create: bool) -> ConsumerGroup:
        group = shard.consumer_groups.get(group_id)
        if group is not None:
            return group
        classic = shard.groups.get(group_id)
        if classic is not None and classic.members:
            raise GroupError(GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            raise GroupError(GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
        return ConsumerGroup(group_id)        # created by the replay of its first records

    def _join_or_update(self, shard, req, api_version, client_id, client_host):
        gid = req.group_id
        group = self._group_for_heartbeat(shard, gid, create=req.member_epoch == 0)
        owned = None if req.topic_partitions is None else assignment_of(req.topic_partitions)
        records: list[Record] = []
        member_id = req.member_id
        if req.member_epoch == 0 and not member_id:
            member_id = self.rt.ids.uuid().hex        # v0: the coordinator names the member
        member, replaced = member_for_heartbeat(group, req, member_id, owned)
        before = group.members.get(member.member_id) if replaced is None else replaced

        names = req.subscribed_topic_names
        regex = req.subscribed_topic_regex if api_version >= 1 else None
        updated = updated_member(member, req, regex, client_id, client_host)

        bump = False
        if replaced is not None:
            records += self._removal_records(gid, replaced.member_id)
            records.append(member_metadata_record(gid, updated))
            if replaced.member_id in group.target_assignment:
                records.append(target_member_record(
                    gid, member_id, group.target_assignment[replaced.member_id]))
            bump = updated.subscription() != replaced.subscription()
        elif before is None or updated.metadata() != before.metadata():
            records.append(member_metadata_record(gid, updated))
            bump = before is None or updated.subscription() != before.subscription()

        members_after = dict(group.members)
        if replaced is not None:
            del members_after[replaced.member_id]
        members_after[updated.member_id] = updated
        subscribed = self._resolve(members_after.values())
        if subscribed != group.subscribed_topics:
            bump = True
        metadata_hash = self._group_hash(subscribed)
        if metadata_hash != group.metadata_hash:
            bump = True
        if group.has_partition_metadata_record:
            records.append(partition_metadata_tombstone(gid))
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append(group_epoch_record(gid, group_epoch, metadata_hash))
            log.info("group %s: epoch %d (hash %d)", gid, group_epoch, metadata_hash)

        target, target_epoch = self._target_after(group, replaced, member_id, group_epoch,
                                                  members_after, subscribed, records)

        def owner_of(tid: uuid.UUID, p: int) -> str | None:
            o = group.owners.get((tid, p))
            if o is None or (replaced is not None and o[0] == replaced.member_id):
                return None
            return o[0]
        reconciled = reconcile(updated, target_epoch, target.get(member_id, {}), owned, owner_of)
        if before is None or replaced is not None or reconciled.assignment() != \
                before.assignment():
            records.append(current_assignment_record(gid, reconciled))

        replay_all(shard, records)
        group = shard.consumer_groups[gid]
        self._after_heartbeat(shard, group, replaced, subscribed, member_id, before, reconciled)

        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1 and (names is not None or regex is not None)
            and req.topic_partitions is not None)
        send = full or before is None or \
            reconciled.assigned_partitions != before.assigned_partitions
        response = ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=NONE, error_message=None, member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.config.group_consumer_heartbeat_interval_ms,
            assignment=self._response_assignment(reconciled) if send else None)
        return response, records

    def _target_after(self, group, replaced, member_id: str, group_epoch: int, members_after,
                      subscribed, records: list[Record]) -> tuple[dict, int]:
        """The target assignment and its epoch once a heartbeat is applied: recomputed (its
        records appended to `records`) when the group epoch moved past it."""
        gid = group.group_id
        target_epoch = group.assignment_epoch
        target = dict(group.target_assignment)
        if replaced is not None and replaced.member_id in target:
            target[member_id] = target.pop(replaced.member_id)
        if group_epoch > target_epoch:
            new_target = self._compute_target(group, members_after, subscribed, target)
            for mid in sorted(new_target):
                if new_target[mid] != target.get(mid):
                    records.append(target_member_record(gid, mid, new_target[mid]))
            records.append(target_metadata_record(gid, group_epoch))
            target, target_epoch = new_target, group_epoch
        return target, target_epoch

    def _after_heartbeat(self, shard, group, replaced, subscribed, member_id: str, before,
                         reconciled: ConsumerGroupMember) -> None:
        """The timers a heartbeat's records leave: the session, and the rebalance timeout of a
        member yet to revoke partitions."""
        if replaced is not None:
            self._cancel(group, "session", replaced.member_id)
            self._cancel(group, "rebalance", replaced.member_id)
        self._set_subscribed(group, subscribed)
        self._schedule_session(shard, group, member_id)
        if reconciled.state == UNREVOKED_PARTITIONS:
            if before is None or before.state != UNREVOKED_PARTITIONS or \
                    before.member_epoch != reconciled.member_epoch:
                self._schedule_rebalance(shard, group, reconciled)
        else:
            self._cancel(group, "rebalance", member_id)

    @staticmethod
    def _response_assignment(m: ConsumerGroupMember):
        A = ConsumerGroupHeartbeatResponse.Assignment
        return A(topic_partitions=topic_partitions_of(A.TopicPartitions, m.assigned_partitions))

    def _compute_target(self, group, members_after, subscribed, previous_target):
        topics = self._topic_descriptions(subscribed)
        specs = {}
        for mid in sorted(members_after):
            m = members_after[mid]
            specs[mid] = MemberSpec(mid, m.rack_id, self._resolve([m]),
                                    previous_target.get(mid, {}))
        name = ConsumerGroup.preferred_assignor(_MembersView(members_after))
        result = assign(name, specs, topics)
        return {mid: {t: frozenset(ps) for t, ps in a.items()} for mid, a in result.items()}

    @staticmethod
    def _removal_records(gid: str, member_id: str) -> list[Record]:
        return [current_assignment_tombstone(gid, member_id),
                target_member_tombstone(gid, member_id),
                member_metadata_tombstone(gid, member_id)]

    # ================================================================== leaving and fencing
    def _leave(self, shard, req):
        gid = req.group_id
        group = self._group_for_heartbeat(shard, gid, create=False)
        member = group.members.get(req.member_id)
        if req.instance_id:
            mapped = group.static_members.get(req.instance_id)
            if mapped is None:
                raise GroupError(UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if mapped != req.member_id:
                raise GroupError(FENCED_INSTANCE_ID, f"Static member {req.member_id} with "
                                 f"instance id {req.instance_id} was fenced by member {mapped}.")
        if member is None:
            raise GroupError(UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of "
                             f"group {gid}.")
        response = ConsumerGroupHeartbeatResponse(
            throttle_time_ms=0, error_code=NONE, error_message=None, member_id=req.member_id,
            member_epoch=req.member_epoch, heartbeat_interval_ms=0, assignment=None)
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # Temporarily gone: keep its assignment for the instance id; its session still runs.
            left = dataclasses.replace(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
            records = [current_assignment_record(gid, left)]
            replay_all(shard, records)
            self._cancel(group, "rebalance", member.member_id)
            return response, records
        return response, self._remove(shard, group, member.member_id, "left")

    def _remove(self, shard, group: ConsumerGroup, member_id: str, why: str) -> list[Record]:
        """Kafka's consumerGroupFenceMember: tombstones and a group epoch bump (the new target
        assignment is computed by the next heartbeat). Applies and returns the records."""
        gid = group.group_id
        records = self._removal_records(gid, member_id)
        rest = [m for mid, m in group.members.items() if mid != member_id]
        subscribed = self._resolve(rest)
        records.append(group_epoch_record(gid, group.group_epoch + 1,
                                          self._group_hash(subscribed)))
        log.info("group %s: member %s %s, epoch %d", gid, member_id, why, group.group_epoch + 1)
        replay_all(shard, records)
        self._cancel(group, "session", member_id)
        self._cancel(group, "rebalance", member_id)
        self._set_subscribed(group, subscribed)
        return records

    def _fence(self, shard, group: ConsumerGroup, member_id: str, why: str,
               epoch: int | None = None) -> None:
        if not self.rt.is_active(shard) or shard.consumer_groups.get(group.group_id) is not group:
            return
        member = group.members.get(member_id)
        if member is None or (epoch is not None and member.member_epoch != epoch):
            return
        if why == "rebalance timeout" and member.state != UNREVOKED_PARTITIONS:
            return
        self.rt.append(shard, self._remove(shard, group, member_id, why), None)

    def _schedule_session(self, shard, group: ConsumerGroup, member_id: str) -> None:
        self._cancel(group, "session", member_id)
        group.timers[("session", member_id)] = self.rt.call_later(
            self.config.group_consumer_session_timeout_ms, self._fence, shard, group, member_id,
            "session timeout")

    def _schedule_rebalance(self, shard, group: ConsumerGroup, m: ConsumerGroupMember) -> None:
        self._cancel(group, "rebalance", m.member_id)
        timeout = m.rebalance_timeout_ms if m.rebalance_timeout_ms > 0 else \
            self.config.group_consumer_session_timeout_ms
        group.timers[("rebalance", m.member_id)] = self.rt.call_later(
            timeout, self._fence, shard, group, m.member_id, "rebalance timeout", m.member_epoch)

    @staticmethod
    def _cancel(group: ConsumerGroup, kind: str, member_id: str) -> None:
        t = group.timers.pop((kind, member_id), None)
        if t is not None:
            t.cancel()

    # ================================================================== ConsumerGroupDescribe
    def describe(self, group_ids: list[str]) -> list:
        Described = ConsumerGroupDescribeResponse.DescribedGroup
        out = []
        for gid in group_ids:
            shard, code = self.rt.shard_for(gid)
            group = shard.consumer_groups.get(gid) if shard is not None else None
            if code == 0 and group is None:
                code = GROUP_ID_NOT_FOUND
                msg = f"Group {gid} is not a consumer group." if gid in shard.groups and \
                    shard.groups[gid].members else f"Group {gid} not found."
            else:
                msg = None
            if code:
                out.append(Described(error_code=code, error_message=msg, group_id=gid,
                                     group_state="", group_epoch=0, assignment_epoch=0,
                                     assignor_name="", members=[],
                                     authorized_operations=-2**31))
                continue
            out.append(Described(
                error_code=NONE, error_message=None, group_id=gid, group_state=group.state,
                group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                assignor_name=group.preferred_assignor(),
                members=[self._describe_member(group, group.members[mid])
                         for mid in sorted(group.members)],
                authorized_operations=-2**31))
        return out

    def _describe_member(self, group: ConsumerGroup, m: ConsumerGroupMember):
        M = ConsumerGroupDescribeResponse.DescribedGroup.Member
        A = M.Assignment
        TP = A.TopicPartitions

        def assignment(a: Assignment):
            tps = []
            for tid in sorted(a):
                info = self.metadata.topics_by_id.get(tid)
                tps.append(TP(topic_id=tid, topic_name=info.name if info else "",
                              partitions=sorted(a[tid])))
            return A(topic_partitions=tps)
        return M(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                 member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                 subscribed_topic_names=list(m.subscribed_topic_names),
                 subscribed_topic_regex=m.subscribed_topic_regex,
                 assignment=assignment(m.assigned_partitions),
                 target_assignment=assignment(group.target_assignment.get(m.member_id, {})),
                 member_type=1)

    # ================================================================== other APIs' hooks
    def list_groups(self, states: list[str] | None, types: list[str] | None
                    ) -> list[tuple[str, str, str, str]]:
        """(group id, protocol type, state, group type) of the loaded consumer groups."""
        wanted_states = {s.lower() for s in states or ()}
        if types and CONSUMER_GROUP_TYPE not in {t.lower() for t in types}:
            return []
        out = []
        for shard in self.rt.shards_in_order():
            if shard.loading:
                continue
            for gid in sorted(shard.consumer_groups):
                state = shard.consumer_groups[gid].state
                if not wanted_states or state.lower() in wanted_states:
                    out.append((gid, CONSUMER_GROUP_TYPE, state, CONSUMER_GROUP_TYPE))
        return out

    def validate_offset_commit(self, shard, group_id: str, member_id: str,
                               member_epoch: int) -> int | None:
        """None: not a consumer group; else 0 or the error (Kafka's validateOffsetCommit)."""
        group = shard.consumer_groups.get(group_id)
        if group is None:
            return None
        if member_epoch < 0 and not group.members:
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return STALE_MEMBER_EPOCH
        return NONE

    # ================================================================== DeleteGroups
    @staticmethod
    def validate_delete_group(shard, group_id: str) -> int | None:
        """None: not a consumer group; else 0, or NON_EMPTY_GROUP while it has members (Kafka's
        ConsumerGroup.validateDeleteGroup)."""
        group = shard.consumer_groups.get(group_id)
        if group is None:
            return None
        return NON_EMPTY_GROUP if group.members else NONE

    def delete_group(self, shard, group_id: str) -> list[Record]:
        """Kafka's ConsumerGroup.createGroupTombstoneRecords, applied at once. Every key the group
        may have in the log gets a tombstone (left-over target members too), so neither a replay
        nor compaction brings any part of it back."""
        group = shard.consumer_groups[group_id]
        members = sorted(set(group.members) | set(group.target_assignment))
        records = [current_assignment_tombstone(group_id, m) for m in members]
        records += [target_member_tombstone(group_id, m) for m in members]
        records.append(target_metadata_tombstone(group_id))
        records += [member_metadata_tombstone(group_id, m) for m in members]
        records += [partition_metadata_tombstone(group_id), group_epoch_tombstone(group_id)]
        self._set_subscribed(group, frozenset())
        replay_all(shard, records)
        return records

    # ================================================================== loading
    def on_loaded(self, shard) -> None:
        """Members of loaded groups must heartbeat within their session (and revoke within their
        rebalance timeout); the resolved subscriptions feed the hash cache's subscriber counts."""
        for gid in sorted(shard.consumer_groups):
            group = shard.consumer_groups[gid]
            self._set_subscribed(group, self._resolve(group.members.values()))
            for mid in sorted(group.members):
                self._schedule_session(shard, group, mid)
                m = group.members[mid]
                if m.state == UNREVOKED_PARTITIONS:
                    self._schedule_rebalance(shard, group, m)

    def on_unloaded(self, shard) -> None:
        for gid in sorted(shard.consumer_groups):
            group = shard.consumer_groups[gid]
            group.cancel_timers()
            self._set_subscribed(group, frozenset())
        shard.consumer_groups.clear()


class _MembersView:
    """Lets preferred_assignor run on a members dict that is not (yet) a group's."""

    def __init__(self, members: dict[str, ConsumerGroupMember]) -> None:
        self.members = members
