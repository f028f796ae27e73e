"""Fetch (key 1), v4-12, for consumers and for followers (replica_id >= 0).

v5: log_start_offset.  v7: incremental fetch sessions (KIP-227, broker/fetch_session.py): a
session's requests carry only changed partitions, its responses only partitions with news.
v9: current_leader_epoch fencing.
v11: rack_id (no follower fetching: preferred_read_replica -1).  v12: flexible, last_fetched_epoch
and diverging_epoch (followers truncate from it).
Long poll: waits up to max_wait_ms until min_bytes are available, woken by appends / HW moves.
KIP-253: a topic's undeleted_partition_count (tag 10000, v12+) must match the leader's, else
INVALID_PARTITION_METADATA for that partition (the consumer refreshes metadata and rejoins).
Hot path: the response is encoded by minibroker.protocol.fast as a prefix + the stored batches'
memoryviews (no copy of record bytes), sent with writelines. The reads and the long poll are
ReplicaManager.fetch_records; this handler resolves the fetch session and encodes the answer.
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from minibroker.broker.dispatch import RawResponse, RequestContext, handles
from minibroker.broker.replica_manager import fetch_error as _error  # noqa: F401 — tests build answers with it
from minibroker.protocol.fast import encode_fetch_response
from minibroker.protocol.messages import FetchRequestKip253 as FetchRequest


def _response(ctx: RequestContext, error_code: int, topics, session_id: int = 0) -> RawResponse:
    return RawResponse(encode_fetch_response(ctx.api_version, ctx.header.correlation_id, 0,
                                             error_code, session_id, topics))


def _session_view(session, incremental: bool, results: dict) -> list:
    """Record what this response says per partition; an incremental one keeps only the news."""
    out = []
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


@handles(ApiKey.Fetch, FetchRequest, versions=(4, 12))
async def handle_fetch(ctx: RequestContext, req: FetchRequest):
    broker = ctx.broker
    session, incremental, items = None, False, None
    if req.session_id != 0 or req.session_epoch == 0:
        err, session, incremental, items = broker.fetch_sessions.resolve(req)
        if err:
            return _response(ctx, err, [])
    if items is None:
        items = [(t.topic, fp, t.undeleted_partition_count) for t in req.topics
                 for fp in t.partitions]
    ctx.frame = None        # the request is decoded: free the receive buffer behind it
    # As Kafka's: the broker's fetch.max.bytes caps the request's, and min_bytes by that (KIP-541)
    max_bytes = min(req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF,
                    broker.config.fetch_max_bytes)
    results = await broker.replica_manager.fetch_records(
        items, req.replica_id, req.max_wait_ms, req.min_bytes, max_bytes, req.isolation_level)
    if session is None:
        return _response(ctx, 0, list(results.items()))
    return _response(ctx, 0, _session_view(session, incremental, results), session.session_id)
