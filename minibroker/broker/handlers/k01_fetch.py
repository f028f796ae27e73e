"""Fetch (key 1), v4-17, for consumers and for followers (replica_id >= 0).

v5: log_start_offset.  v7: incremental fetch sessions (KIP-227, broker/fetch_session.py): a
session's requests carry only changed partitions, its responses only partitions with news.
v9: current_leader_epoch fencing.
v11: rack_id (no follower fetching: preferred_read_replica -1).  v12: flexible, last_fetched_epoch
and diverging_epoch (followers truncate from it).
v13: topic ids instead of names (KIP-516), in requests, forgotten topics and responses; an id this
broker does not know is UNKNOWN_TOPIC_ID for its partitions.  v14: as v13 (KIP-405).
v15: the replica id moves to the replica_state tag (KIP-903).  v16: KIP-951 leader discovery:
a NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH partition names the current leader (tag 1), and
the response lists those leaders' endpoints (node_endpoints).  v17: as v16 (KIP-853).
Long poll: waits up to max_wait_ms until min_bytes are available, woken by appends / HW moves.
KIP-253: a topic's undeleted_partition_count (tag 10000, v12+) must match the leader's, else
INVALID_PARTITION_METADATA for that partition (the consumer refreshes metadata and rejoins).
KIP-11 (with an authorizer): a follower needs CLUSTER_ACTION (else every partition
TOPIC_AUTHORIZATION_FAILED, broker/authorization.py), a consumer READ on each topic.
Hot path: the response is encoded by minibroker.protocol.fast as a prefix + the stored batches'
memoryviews (no copy of record bytes), sent with writelines. The reads and the long poll are
ReplicaManager.fetch_records; this handler resolves the fetch session and encodes the answer.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from kafka.errors import (FencedLeaderEpochError, NotLeaderForPartitionError,
                          TopicAuthorizationFailedError, UnknownTopicIdError)
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import RawResponse, handles
from minibroker.broker.leader_hints import LeaderHints
from minibroker.broker.fetch_path import fetch_error as _error
from minibroker.broker.fetch_session import FetchSession
from minibroker.protocol.fast import FetchPartition, NodeEndpoint, encode_fetch_response
from minibroker.protocol.messages import FetchRequestKip253 as FetchRequest
from minibroker.security.acl import AclOperation as Op, ResourceType as RT

_LEADER_MOVED = (NotLeaderForPartitionError.errno, FencedLeaderEpochError.errno)
_NO_ID = uuid.UUID(int=0)
# (topic: its name, or v13+ an unknown topic's id; the request's partition or a SessionPartition;
# the undeleted partition count)
FetchItem = tuple[Any, Any, int]
# a response's topics: (name, or v13+ topic id; its partitions)
Answers = Sequence[tuple[str | uuid.UUID, list[FetchPartition]]]


def _response(ctx: RequestContext, error_code: int, topics: Answers, session_id: int = 0
              ) -> RawResponse:
    endpoints: Sequence[NodeEndpoint] = ()
    if ctx.api_version >= 13:
        topics, endpoints = _by_topic_id(ctx, topics)
    # the encoder's arguments go along: the trace summarises them, not the bytes (trace_json)
    return RawResponse(encode_fetch_response(ctx.api_version, ctx.header.correlation_id, 0,
                                             error_code, session_id, topics, endpoints),
                       (0, error_code, session_id, topics, endpoints))


def _resolve_topic_ids(ctx: RequestContext, req: FetchRequest) -> None:
    """v13+: name each topic by its id; an id this broker does not know stays a uuid.UUID, which
    no partition is keyed by (answered UNKNOWN_TOPIC_ID)."""
    by_id = ctx.metadata.topics_by_id
    for t in (*req.topics, *(req.forgotten_topics_data or ())):
        info = by_id.get(t.topic_id)
        t.topic = t.topic_id if info is None else info.name


def _by_topic_id(ctx: RequestContext, topics: Answers
                 ) -> tuple[list[tuple[uuid.UUID, list[FetchPartition]]], list[NodeEndpoint]]:
    """v13+ answers name topics by id; v16+ (KIP-951) a partition whose leader moved names the
    current leader, and the response carries the endpoints of those leaders."""
    cache = ctx.metadata
    hints = LeaderHints(cache) if ctx.api_version >= 16 else None
    out: list[tuple[uuid.UUID, list[FetchPartition]]] = []
    for name, parts in topics:
        if isinstance(name, uuid.UUID):
            out.append((name, parts))
            continue
        if hints is not None and any(p.error_code in _LEADER_MOVED for p in parts):
            parts = [p._replace(current_leader=hints.current_leader(name, p.partition_index))
                     if p.error_code in _LEADER_MOVED else p for p in parts]
        info = cache.topics.get(name)
        out.append((_NO_ID if info is None else info.topic_id, parts))
    return out, hints.node_endpoints() if hints is not None else []


def _session_view(session: FetchSession, incremental: bool,
                  results: dict[str, list[FetchPartition]]
                  ) -> list[tuple[str | uuid.UUID, list[FetchPartition]]]:
    """Record what this response says per partition; an incremental one keeps only the news."""
    out: list[tuple[str | uuid.UUID, list[FetchPartition]]] = []
    for topic, parts in results.items():
        keep = []
        for part in parts:
            moved = session.changed(topic, part.partition_index, (
                part.high_watermark, part.last_stable_offset, part.log_start_offset))
            if not incremental or moved or part.records or part.error_code \
                    or part.diverging_epoch is not None:
                keep.append(part)
        if keep:
            out.append((topic, keep))
    return out


def _unknown_ids(items: list[FetchItem]
                 ) -> tuple[list[FetchItem], dict[Any, list[FetchPartition]]]:
    """Split off the partitions of unknown topic ids: (the rest, their UNKNOWN_TOPIC_ID answers)."""
    known: list[FetchItem] = []
    unknown: dict[Any, list[FetchPartition]] = {}
    for item in items:
        if isinstance(item[0], uuid.UUID):
            unknown.setdefault(item[0], []).append(_error(item[1].partition,
                                                          UnknownTopicIdError.errno))
        else:
            known.append(item)
    return known, unknown


def _readable(ctx: RequestContext, items: list[FetchItem],
              denied: dict[Any, list[FetchPartition]]) -> list[FetchItem]:
    """KIP-11: a consumer reads only the topics it may READ (the session's partitions too); the
    others answer TOPIC_AUTHORIZATION_FAILED. (A follower's CLUSTER_ACTION is checked before.)"""
    out: list[FetchItem] = []
    for item in items:
        if ctx.authorize(Op.READ, RT.TOPIC, item[0]):
            out.append(item)
        else:
            denied.setdefault(item[0], []).append(
                _error(item[1].partition, TopicAuthorizationFailedError.errno))
    return out


@handles(ApiKey.Fetch, FetchRequest, versions=(4, 17))
async def handle_fetch(ctx: RequestContext, req: FetchRequest) -> RawResponse:
    session: FetchSession | None = None
    incremental = False
    items: list[FetchItem] | None = None
    replica_id = req.replica_id
    if ctx.api_version >= 13:
        _resolve_topic_ids(ctx, req)
        if ctx.api_version >= 15:
            replica_id = req.replica_state.replica_id if req.replica_state is not None else -1
    if req.session_id != 0 or req.session_epoch == 0:
        err, session, incremental, items = ctx.services.fetch_sessions.resolve(req)
        if err:
            return _response(ctx, err, [])
    if items is None:
        items = [(t.topic, fp, t.undeleted_partition_count) for t in req.topics
                 for fp in t.partitions]
    ctx.frame = None        # the request is decoded: free the receive buffer behind it
    # As Kafka's: the broker's fetch.max.bytes caps the request's, and min_bytes by that (KIP-541)
    max_bytes = min(req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF,
                    ctx.config.fetch_max_bytes)
    unknown: dict[Any, list[FetchPartition]] = {}      # by unknown topic id, or denied name
    if ctx.api_version >= 13:
        items, unknown = _unknown_ids(items)
    if ctx.authorizer is not None and replica_id < 0:
        items = _readable(ctx, items, unknown)
    results = await ctx.replica_manager.fetch_records(
        items, replica_id, req.max_wait_ms, req.min_bytes, max_bytes, req.isolation_level,
        incremental, session)
    results.update(unknown)
    if session is None:
        return _response(ctx, 0, list(results.items()))
    return _response(ctx, 0, _session_view(session, incremental, results), session.session_id)
