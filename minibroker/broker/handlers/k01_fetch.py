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
memoryviews (no copy of record bytes), sent with writelines.
"""
from __future__ import annotations

import asyncio

from kafka.errors import OffsetOutOfRangeError
from kafka.protocol.api_key import ApiKey

from minibroker.broker.dispatch import RawResponse, RequestContext, handles
from minibroker.broker.first_fetch import WAKE
from minibroker.protocol.fast import FetchPartition as _Part, encode_fetch_response
from minibroker.protocol.messages import FetchRequestKip253 as FetchRequest


# A partition without data carries empty records, never null: Kafka sends MemoryRecords.EMPTY, and
# librdkafka fails the whole response on a null ("invalid MessageSetSize -1") and fetches again at
# once, in a tight loop for as long as the error lasts.
NO_RECORDS = ()


def _error(index: int, code: int, high_watermark: int = -1, log_start_offset: int = -1) -> _Part:
    return _Part(index, code, high_watermark, -1, log_start_offset, NO_RECORDS)


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


def _diverging(p, last_fetched_epoch: int, fetch_offset: int):
    if last_fetched_epoch < 0:
        return None
    epoch, end_offset = p.log.end_offset_for_epoch(last_fetched_epoch)
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return (epoch, end_offset)
    return None


def _wake(fut) -> None:
    if not fut.done():
        fut.set_result(None)


def _count_bytes_out(stats, follower: bool, sizes: dict[str, int]) -> None:
    """Kafka's BytesOut (consumers, per topic) and ReplicationBytesOut (followers)."""
    if follower:
        stats.replication_bytes_out += sum(sizes.values())
        return
    for topic, n in sizes.items():
        stats.topics[topic].bytes_out += n


@handles(ApiKey.Fetch, FetchRequest, versions=(4, 12))
async def handle_fetch(ctx: RequestContext, req: FetchRequest):
    rm = ctx.broker.replica_manager
    replica_id = req.replica_id
    follower = replica_id >= 0
    session, incremental, items = None, False, None
    if req.session_id != 0 or req.session_epoch == 0:
        err, session, incremental, items = ctx.broker.fetch_sessions.resolve(req)
        if err:
            return _response(ctx, err, [])
    now = ctx.clock.now_ms()
    loop = asyncio.get_running_loop()
    # Resolve partitions and record follower progress once, before any waiting.
    plan = []
    if items is None:
        items = [(t.topic, fp, t.undeleted_partition_count) for t in req.topics
                 for fp in t.partitions]
    for topic, fp, undeleted_partition_count in items:
        p, err = rm.leader_partition(topic, fp.partition, fp.current_leader_epoch)
        if not err and not follower:
            err = rm.check_partition_metadata(p, undeleted_partition_count, producing=False)
        if not err and follower:
            p.update_follower_fetch(replica_id, fp.fetch_offset, now)
        plan.append((topic, fp, p, err))
    max_wait_ms = max(req.max_wait_ms, 0)
    # As Kafka's: the broker's fetch.max.bytes caps the request's, and min_bytes by that (KIP-541)
    max_bytes = min(req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF, ctx.broker.config.fetch_max_bytes)
    min_bytes = min(req.min_bytes, max_bytes)
    if follower:
        max_wait_ms = rm.first_fetches.max_wait_ms(replica_id, max_wait_ms)
    deadline = loop.time() + max_wait_ms / 1000
    while True:
        results: dict[str, list] = {}
        sizes: dict[str, int] = {}      # bytes returned per topic, for the broker's counters
        total = 0
        errors = False
        remaining = max_bytes
        waiters = []
        for topic, fp, p, err in plan:
            out = results.setdefault(topic, [])
            if err:
                out.append(_error(fp.partition, err))
                errors = True
                continue
            div = _diverging(p, fp.last_fetched_epoch, fp.fetch_offset) if follower else None
            if div is not None:
                out.append(_Part(fp.partition, 0, p.high_watermark, p.last_stable_offset(),
                                 p.log.log_start_offset, NO_RECORDS, div))
                errors = True
                continue
            max_offset = p.log.log_end_offset if follower else (
                p.last_stable_offset() if req.isolation_level else p.high_watermark)
            if not p.log.log_start_offset <= fp.fetch_offset <= p.log.log_end_offset:
                out.append(_error(fp.partition, OffsetOutOfRangeError.errno, p.high_watermark,
                                  p.log.log_start_offset))
                errors = True
                continue
            records = ()
            if fp.fetch_offset < max_offset and remaining > 0:
                r = p.log.read(fp.fetch_offset, min(fp.partition_max_bytes, remaining), max_offset,
                               min_one=(total == 0))
                if r.size:
                    records = r.records
                    total += r.size
                    sizes[topic] = sizes.get(topic, 0) + r.size
                    remaining -= r.size
            else:
                waiters.append(p)
            out.append(_Part(fp.partition, 0, p.high_watermark, p.last_stable_offset(),
                             p.log.log_start_offset, records))
        timeout = deadline - loop.time()
        # A float remainder below the clock's resolution would re-arm a timer that never moves
        # the (virtual) clock: treat it as elapsed.
        if total >= min_bytes or errors or timeout <= 1e-6 or not waiters \
                or not ctx.broker.running:
            break
        # One future for every partition waited on: the first append / HW move resolves it and
        # this task resumes in the next loop pass (no asyncio.wait hop); a timer ends the wait.
        ctx.frame = None        # the request is decoded: free the receive buffer behind it
        fut = loop.create_future()
        for p in waiters:
            p.add_data_waiter(fut)
        timer = loop.call_later(timeout, _wake, fut)
        if follower:
            rm.first_fetches.waiting(replica_id, fut)
        try:
            woken_by = await fut
        finally:
            timer.cancel()
            if not fut.done():
                fut.cancel()
            if follower:
                rm.first_fetches.done_waiting(replica_id, fut)
        if woken_by is WAKE:
            break           # we lead a new partition of this follower: let it fetch that too
    if total:
        _count_bytes_out(ctx.broker.stats, follower, sizes)
    if session is None:
        return _response(ctx, 0, list(results.items()))
    return _response(ctx, 0, _session_view(session, incremental, results), session.session_id)
