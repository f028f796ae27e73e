"""Streaming micro-batch planning (runs in the query's runner process): where each micro-batch
ends, given where it begins, the broker's offsets, KIP-253 caps and the trigger's read limits."""
from __future__ import annotations

import logging

from pyspark.sql.streaming.datasource import ReadAllAvailable

from minibroker.client import TopicPartition
from minibroker.spark import _kafka, ordering
from minibroker.spark.options import EARLIEST, LATEST, SourceOptions

log = logging.getLogger("minibroker.spark.planner")


def latest_offsets(opts: SourceOptions) -> dict[TopicPartition, int]:
    async def go(admin):
        topics = await _kafka._topics(admin, opts.subscribe, opts.pattern, opts.assign)
        return await _kafka._offsets(admin, {TopicPartition(t, p): LATEST
                                             for t, i in topics.items() for p in i.partitions})
    return _kafka.run_with_admin(opts.bootstrap, go)


def rate_limit(begin: dict[TopicPartition, int], cap: dict[TopicPartition, int],
               max_rows: int) -> dict[TopicPartition, int]:
    """Share `max_rows` over the partitions in proportion to their backlog, never exceeding it
    (the remainder goes to the largest backlogs, ties by partition)."""
    lag = {tp: max(0, cap[tp] - begin[tp]) for tp in cap}
    total = sum(lag.values())
    if total <= max_rows:
        return dict(cap)
    share = {tp: lag[tp] * max_rows // total for tp in lag}
    left = max_rows - sum(share.values())
    for tp in sorted(lag, key=lambda t: (-(lag[t] - share[t]), t)):
        if left <= 0:
            break
        if share[tp] < lag[tp]:
            share[tp] += 1
            left -= 1
    return {tp: begin[tp] + share[tp] for tp in cap}


def plan_end(opts: SourceOptions, start: dict[TopicPartition, int], limit, target,
             since_last_batch_s: float) -> tuple[dict[TopicPartition, int], int]:
    """(end offsets of the next micro-batch, rows in it)."""
    async def go(admin):
        topics = await _kafka._topics(admin, opts.subscribe, opts.pattern, opts.assign)
        tps = [TopicPartition(t, p) for t, i in sorted(topics.items()) for p in i.partitions]
        latest = await _kafka._offsets(admin, {tp: LATEST for tp in tps})
        earliest = await _kafka._offsets(admin, {tp: EARLIEST for tp in tps})
        begin: dict[TopicPartition, int] = {}
        reset: set[TopicPartition] = set()
        for tp in tps:
            b = start.get(tp)
            if b is None:
                b = earliest[tp]              # discovered since: from its beginning, as Spark
            elif b > latest[tp]:
                # The partition is not the one we read (KIP-253: drained, removed and created
                # again at this index) or its log was truncated.
                if opts.fail_on_data_loss and (topics[tp.topic].counts is None):
                    raise _kafka.DataLossError(f"{tp.topic}-{tp.partition}: offset went back from "
                                               f"{b} to {latest[tp]}; some data may have been lost")
                b = earliest[tp]
                reset.add(tp)
            begin[tp] = b
        cap = {tp: max(begin[tp], latest[tp]) for tp in tps}
        if target is not None:
            cap = {tp: min(c, max(begin[tp], target.get(tp, begin[tp]))) for tp, c in cap.items()}
        if opts.ordered_delivery:
            held = await ordering.caps(admin, topics, begin, earliest, latest)
            for tp, c in held.items():
                if tp in cap:
                    cap[tp] = max(begin[tp], min(cap[tp], c))
        return begin, cap, reset
    begin, cap, reset = _kafka.run_with_admin(opts.bootstrap, go)
    available = sum(cap[tp] - begin[tp] for tp in cap)
    # availableNow: Spark hands Python sources ReadAllAvailable, yet Spark's Kafka source still
    # splits the backlog by maxOffsetsPerTrigger (and never waits for minOffsetsPerTrigger).
    limited = target is not None or (limit is not None and not isinstance(limit, ReadAllAvailable))
    if limited and target is None and opts.min_offsets_per_trigger and available < opts.min_offsets_per_trigger \
            and since_last_batch_s * 1000 < opts.max_trigger_delay_ms and not reset:
        return dict(start), 0
    if limited and opts.max_offsets_per_trigger:
        cap = rate_limit(begin, cap, opts.max_offsets_per_trigger)
    end = dict(cap)
    for tp in reset:
        end[tp] = min(end[tp], begin[tp])     # one empty step re-bases it (end < start: see below)
    rows = sum(end[tp] - begin[tp] for tp in end)
    if rows == 0 and not reset and all(start.get(tp) == end[tp] for tp in end):
        return dict(start), 0
    return end, rows


def batch_ranges(opts: SourceOptions, start: dict[TopicPartition, int],
                 end: dict[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
    """[begin, end) per partition of a planned micro-batch (also when re-planned after a restart)."""
    fresh = [tp for tp in end if start.get(tp) is None or end[tp] < start[tp]]
    earliest = {}
    if fresh:
        earliest = _kafka.run_with_admin(opts.bootstrap,
                                         lambda admin: _kafka._offsets(admin, {tp: EARLIEST for tp in fresh}))
    out = {}
    for tp, e in end.items():
        b = earliest[tp] if tp in earliest else start[tp]
        if e > b:
            out[tp] = (b, e)
    return out
