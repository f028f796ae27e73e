"""Committed offsets of every group (Kafka's OffsetMetadataManager): OffsetCommit, OffsetFetch,
OffsetDelete, retention (offsets.retention.minutes) and the offsets of deleted partitions.

Offsets live in each shard's classic groups (`shard.groups`): a classic group's own, a KIP-848
group's in an Empty holder group of the same id, a standalone committer's in an Empty group
without protocol type. Every change is a record applied by minibroker.coordinator.replay.replay.

Decisions (Kafka's behaviour unless said):
- Offsets become visible to OffsetFetch once their records reached the high watermark (they are
  replayed then); deletions (OffsetDelete, retention, deleted partitions) apply at once and write
  tombstones, as Kafka's cleanupGroupMetadata does, and an Empty group left without offsets gets
  a group tombstone. A commit still waiting for the high watermark when its partition is deleted
  is not applied (Kafka's pendingOffsetCommits).
- OffsetCommit with generation >= 0 for an unknown group: ILLEGAL_GENERATION (Kafka 3.x classic
  coordinator); generation < 0: a standalone (Empty, no protocol type) group is created. A
  KIP-848 group's commit is checked against the member epoch.
- A failed offset write maps like Kafka's GroupMetadataManager: NOT_LEADER -> NOT_COORDINATOR,
  not enough replicas -> COORDINATOR_NOT_AVAILABLE, too large -> INVALID_COMMIT_OFFSET_SIZE.
"""
from __future__ import annotations

import asyncio

import kafka.errors as Errors

from minibroker.coordinator.context import (CoordinatorContext, CoordinatorPart, completed,
                                            group_shard)
from minibroker.coordinator.errors import (
    COMMON_WRITE_ERRORS, GROUP_ID_NOT_FOUND, GROUP_SUBSCRIBED_TO_TOPIC,
    NON_EMPTY_GROUP, NONE, UNKNOWN_TOPIC_OR_PARTITION)
from minibroker.coordinator.group.classic_group import (
    CONSUMER_PROTOCOL_TYPE, DEAD, EMPTY, STABLE, ClassicGroup, OffsetAndMetadata)
from minibroker.coordinator.group.classic_group_records import (group_tombstone,
                                                                offset_commit_record,
                                                                offset_tombstone)
from minibroker.coordinator.replay import replay, replay_all


OFFSET_METADATA_TOO_LARGE = Errors.OffsetMetadataTooLargeError.errno
OFFSET_METADATA_MAX_BYTES = 4096                # offset.metadata.max.bytes
INT64_MAX = 2**63 - 1


class OffsetMetadataManager(CoordinatorPart):

    # ================================================================== OffsetCommit
    def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                       group_instance_id: str | None, retention_time_ms: int,
                       offsets: list[tuple[str, int, int, int, str | None, int]]) -> asyncio.Future:
        """offsets: (topic, partition, offset, leader_epoch, metadata, commit_timestamp or -1).
        A future of {(topic, partition): error}."""
        keys = [(t, p) for t, p, *_ in offsets]

        def all_(code):
            return completed({k: code for k in keys})
        shard, code = self.rt.shard_for(group_id)
        if code:
            return all_(code)
        code = self.rt.consumer.validate_offset_commit(shard, group_id, member_id, generation_id)
        if code is not None:            # a KIP-848 group: offsets kept in its offset holder
            if code:
                return all_(code)
            generation_id, member_id, group_instance_id = -1, "", None
        group, code = self.rt.classic.validate_offset_commit(shard, group_id, generation_id,
                                                             member_id, group_instance_id)
        if code:
            return all_(code)
        now = self.now_ms
        result: dict[tuple[str, int], int] = {}
        records = []
        pending: list[tuple[str, str, int]] = []
        for topic, partition, offset, leader_epoch, metadata, commit_ts in offsets:
            if self.rt.metadata.partition(topic, partition) is None:
                result[(topic, partition)] = UNKNOWN_TOPIC_OR_PARTITION
                continue
            metadata = metadata or ""
            if len(metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                result[(topic, partition)] = OFFSET_METADATA_TOO_LARGE
                continue
            ts = commit_ts if commit_ts is not None and commit_ts >= 0 else now
            # A retention past the int64 range means "never" (Kafka's long would wrap negative).
            expire = min(ts + retention_time_ms, INT64_MAX) if retention_time_ms is not None \
                and retention_time_ms >= 0 else -1
            om = OffsetAndMetadata(offset, leader_epoch, metadata, ts, expire)
            records.append(offset_commit_record(group_id, topic, partition, om))
            pending.append((group_id, topic, partition))
            result[(topic, partition)] = NONE
        if not records:
            self.rt.classic.maybe_forget(shard, group)
            return completed(result)

        # Until replayed, each record is a pending commit a partition deletion may cancel.
        token = object()
        for key in pending:
            shard.pending_offset_commits.setdefault(key, set()).add(token)

        def committed(code: int) -> None:
            # A record whose token is gone: its partition was deleted meanwhile.
            live = [record for key, record in zip(pending, records)
                    if token in shard.pending_offset_commits.get(key, ())]
            for key in sorted(set(pending)):
                tokens = shard.pending_offset_commits.get(key)
                if tokens is not None:
                    tokens.discard(token)
                    if not tokens:
                        del shard.pending_offset_commits[key]
            if code == NONE and self.rt.is_active(shard):
                for key, value in live:
                    replay(shard, key, value)
        write = self.rt.append(shard, records, committed)
        fut = asyncio.get_running_loop().create_future()

        def finish(w: asyncio.Future) -> None:
            code = self._offset_write_error(w.result())
            fut.set_result({k: (code if v == NONE else v) for k, v in result.items()})
        write.add_done_callback(finish)
        return fut

    # ================================================================== OffsetFetch
    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None
                      ) -> tuple[int, list[tuple[str, list[tuple[int, int, int, str, int]]]]]:
        """(error, [(topic, [(partition, offset, leader_epoch, metadata, error)])]);
        topics None: every committed offset of the group."""
        shard, code = self.rt.shard_for(group_id)
        if code:
            return code, []
        group = shard.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(DEAD) else {}
        out: list = []
        if topics is None:
            by_topic: dict[str, list] = {}
            for (t, p) in sorted(offsets):
                om = offsets[(t, p)]
                by_topic.setdefault(t, []).append((p, om.offset, om.leader_epoch, om.metadata,
                                                   NONE))
            return NONE, list(by_topic.items())
        for topic, partitions in topics:
            parts = []
            for p in partitions:
                om = offsets.get((topic, p))
                parts.append((p, -1, -1, "", NONE) if om is None else
                             (p, om.offset, om.leader_epoch, om.metadata, NONE))
            out.append((topic, parts))
        return NONE, out

    # ================================================================== OffsetDelete
    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> asyncio.Future:
        """A future of (error, {(topic, partition): error})."""
        shard, code = group_shard(self.rt, group_id)
        if code:
            return completed((code, {}))
        group = shard.groups.get(group_id)
        if group is None or group.is_(DEAD):
            return completed((GROUP_ID_NOT_FOUND, {}))
        if not group.is_(EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return completed((NON_EMPTY_GROUP, {}))
        result: dict[tuple[str, int], int] = {}
        removed: list[tuple[str, int]] = []
        for topic, partition in partitions:
            if self.rt.metadata.partition(topic, partition) is None:
                result[(topic, partition)] = UNKNOWN_TOPIC_OR_PARTITION
            elif not group.is_(EMPTY) and group.is_subscribed_to(topic):
                result[(topic, partition)] = GROUP_SUBSCRIBED_TO_TOPIC
            else:
                result[(topic, partition)] = NONE
                if (topic, partition) in group.offsets and (topic, partition) not in removed:
                    removed.append((topic, partition))
        records = self.remove_offsets(shard, group_id, group, removed)
        if not records:
            return completed((NONE, result))
        fut = asyncio.get_running_loop().create_future()
        write = self.rt.append(shard, records, None)
        write.add_done_callback(lambda w: fut.set_result(
            (self._offset_write_error(w.result()), result)))
        return fut

    def remove_offsets(self, shard, group_id: str, group, keys: list[tuple[str, int]]) -> list:
        """Tombstones for the group's offsets of `keys`, and Kafka's cleanupGroupMetadata: an
        Empty group left without offsets gets a group tombstone. Applied through replay;
        returns the records to append."""
        records = [offset_tombstone(group_id, t, p) for t, p in keys]
        if (group is not None and group.is_(EMPTY) and not group.pending_members
                and not group.offsets.keys() - set(keys)):
            records.append(group_tombstone(group_id))
        return replay_all(shard, records)

    # ================================================================== retention
    def expire_offsets(self) -> int:
        """Offsets past offsets.retention.minutes (Kafka 2.1+ rules); returns how many."""
        now = self.now_ms
        retention_ms = self.config.offsets_retention_minutes * 60_000
        expired_count = 0
        for shard in self.rt.shards_in_order():
            if shard.loading:
                continue
            records = []
            for gid in sorted(shard.groups):
                group = shard.groups[gid]
                expired = self._expired_offsets(group, now, retention_ms)
                expired_count += len(expired)
                records += self.remove_offsets(shard, gid, group, expired)
            if records:
                self.rt.append(shard, records, None)
        return expired_count

    # ================================================================== deleted partitions
    def on_partitions_deleted(self, shard, partitions: list[tuple[str, int]]) -> list:
        """Kafka's onPartitionsDeleted for one loaded shard (offsets of every group, KIP-848
        groups' holders included): tombstones for committed and pending commits of these
        partitions, the pending ones are then not applied; an Empty group left without offsets
        is removed (cleanupGroupMetadata). Returns the records to append."""
        gone = set(partitions)
        by_group: dict[str, set[tuple[str, int]]] = {}
        for key in sorted(k for k in shard.pending_offset_commits if k[1:] in gone):
            del shard.pending_offset_commits[key]
            by_group.setdefault(key[0], set()).add(key[1:])
        for gid in sorted(shard.groups):
            hit = gone & shard.groups[gid].offsets.keys()
            if hit:
                by_group.setdefault(gid, set()).update(hit)
        records = []
        for gid in sorted(by_group):
            records += self.remove_offsets(shard, gid, shard.groups.get(gid),
                                            sorted(by_group[gid]))
        return records

    @staticmethod
    def _expired_offsets(group: ClassicGroup, now: int, retention_ms: int) -> list:
        def is_expired(om: OffsetAndMetadata, base: int) -> bool:
            if om.expire_timestamp != -1:
                return now >= om.expire_timestamp
            return now - base >= retention_ms

        if group.is_(EMPTY):
            if group.protocol_type is None:
                return [k for k, om in sorted(group.offsets.items())
                        if is_expired(om, om.commit_timestamp)]
            return [k for k, om in sorted(group.offsets.items())
                    if is_expired(om, group.current_state_timestamp
                                  if group.current_state_timestamp >= 0 else om.commit_timestamp)]
        if group.is_(STABLE) and group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            subscribed = group.subscribed_topics()
            if subscribed is not None:
                return [k for k, om in sorted(group.offsets.items())
                        if k[0] not in subscribed and is_expired(om, om.commit_timestamp)]
        return []

    @staticmethod
    def _offset_write_error(code: int) -> int:
        return _OFFSET_WRITE_ERRORS.get(code, code)



_OFFSET_WRITE_ERRORS = {
    **COMMON_WRITE_ERRORS,
    Errors.MessageSizeTooLargeError.errno: Errors.InvalidCommitOffsetSizeError.errno,
    Errors.RecordListTooLargeError.errno: Errors.InvalidCommitOffsetSizeError.errno,
}
