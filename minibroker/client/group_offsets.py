"""A consumer's committed offsets at its group coordinator: OffsetCommit and OffsetFetch (v8+
batched per group), on top of the group membership (the coordinator, the generation, the member
id they carry).
"""
from __future__ import annotations

import asyncio
import collections

import kafka.errors as Errors
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from minibroker.client.group_membership import COORDINATOR_ERRORS, REJOIN_ERRORS, GroupMembership
from minibroker.client.records import TopicPartition


class GroupOffsets(GroupMembership):
    async def _commit(self, offsets: dict[TopicPartition, int]) -> None:
        node = await self._ensure_coordinator()
        topics: dict[str, list] = collections.defaultdict(list)
        P = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
        for tp, off in sorted(offsets.items()):
            topics[tp.topic].append(P(partition_index=tp.partition, committed_offset=off,
                                      committed_leader_epoch=-1, commit_timestamp=-1,
                                      committed_metadata=""))
        subscribed = self._subscription is not None
        req = OffsetCommitRequest(
            group_id=self.group_id,
            generation_id_or_member_epoch=self.generation_id if subscribed else -1,
            member_id=self.member_id if subscribed else "", group_instance_id=None,
            retention_time_ms=-1,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=n, partitions=ps)
                    for n, ps in topics.items()])
        try:
            resp = await self.pool.request(node, req, lo=2, hi=9)
        except (ConnectionError, asyncio.TimeoutError, Errors.KafkaConnectionError) as e:
            self._coordinator_dead(node)
            raise Errors.KafkaConnectionError(f"OffsetCommit: {e!r}") from e
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    if p.error_code in REJOIN_ERRORS:
                        self._need_rejoin(p.error_code)
                    if p.error_code in COORDINATOR_ERRORS:
                        self._coordinator_dead(node)
                    raise Errors.for_code(p.error_code)(f"OffsetCommit {t.name}-{p.partition_index}")
                tp = TopicPartition(t.name, p.partition_index)
                if tp in self._parts:
                    self._parts[tp].committed = offsets[tp]

    async def _offset_fetch(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if self.group_id is None or not tps:
            return {}
        node = await self._ensure_coordinator()
        topics: dict[str, list[int]] = collections.defaultdict(list)
        for tp in tps:
            topics[tp.topic].append(tp.partition)
        conn = await self.pool.get(node)
        version = self.pool.version(conn, OffsetFetchRequest, lo=1, hi=9)
        if version >= 8:
            G = OffsetFetchRequest.OffsetFetchRequestGroup
            req = OffsetFetchRequest(groups=[G(
                group_id=self.group_id, member_id=None, member_epoch=-1,
                topics=[G.OffsetFetchRequestTopics(name=n, partition_indexes=ps)
                        for n, ps in topics.items()])], require_stable=False)
        else:
            req = OffsetFetchRequest(group_id=self.group_id, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=n, partition_indexes=ps)
                for n, ps in topics.items()], require_stable=False)
        try:
            resp = await conn.request(req, version, timeout=self.pool.request_timeout)
        except (ConnectionError, asyncio.TimeoutError) as e:
            self._coordinator_dead(node)
            raise Errors.KafkaConnectionError(f"OffsetFetch: {e!r}") from e
        if version >= 8:
            group = resp.groups[0]
            code, rtopics = group.error_code, group.topics
        else:
            code, rtopics = getattr(resp, "error_code", 0), resp.topics
        if code:
            if code in COORDINATOR_ERRORS:
                self._coordinator_dead(node)
            raise Errors.for_code(code)("OffsetFetch")
        out = {}
        for t in rtopics:
            for p in t.partitions:
                if p.error_code:
                    raise Errors.for_code(p.error_code)(f"OffsetFetch {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
        return out
