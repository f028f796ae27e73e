"""Streaming micro-batch planning (runs in the query's runner process): where each micro-batch
ends, given where it begins, the broker's offsets, KIP-253 caps and the trigger's read limits."""
from __future__ import annotations

import dataclasses
import logging

from pyspark.sql.streaming.datasource import ReadAllAvailable

from minibroker.client import TopicPartition
from minibroker.spark import _kafka, lineage, ordering
from minibroker.spark.lineage import Lineage
from minibroker.spark.options import (EARLIEST, LATEST, SourceOptions, from_json_offsets,
                                      to_json_offsets)

log = logging.getLogger("minibroker.spark.planner")


def latest_offsets(opts: SourceOptions) -> dict[TopicPartition, int]:
    async def go(admin):
        topics = await _kafka._topics(admin, opts.subscribe, opts.pattern, opts.assign)
        return await _kafka._offsets(admin, {TopicPartition(t, p): LATEST
                                             for t, i in topics.items() for p in i.partitions},
                                     drop_missing=True)
    return _kafka.run_with_admin(opts.client, go)


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


def plan_end(opts: SourceOptions, start_json: dict, limit, target,
             since_last_batch_s: float) -> tuple[dict, int]:
    """(the next micro-batch's end, as checkpoint JSON with its lineage keys; rows in it).

    A partition gone since (KIP-253 removal after draining, a deleted topic) is closed: no
    ListOffsets for it, its offset kept, nothing read; one that comes back as a new incarnation
    (minibroker.spark.lineage) is read from its beginning, under the same ordering caps as any
    partition created by an expansion."""
    start = from_json_offsets(start_json)
    seen = Lineage.from_json(start_json)

    async def go(admin):
        topics = await _kafka._topics(admin, opts.subscribe, opts.pattern, opts.assign)
        listed = [TopicPartition(t, p) for t, i in sorted(topics.items()) for p in i.partitions]
        epochs: dict[TopicPartition, int] = {}
        latest = await _kafka._offsets(admin, {tp: LATEST for tp in listed}, drop_missing=True,
                                       leader_epochs=epochs)
        earliest = await _kafka._offsets(admin, {tp: EARLIEST for tp in listed if tp in latest},
                                         drop_missing=True)
        fresh, unknown = await lineage.new_lineages(
            admin, topics, start, seen, {tp: e for tp, e in epochs.items() if tp in earliest})
        tps = [tp for tp in listed if tp in earliest and tp not in unknown]
        begin: dict[TopicPartition, int] = {}
        reset: set[TopicPartition] = set()
        for tp in tps:
            b = start.get(tp)
            if b is None:
                b = earliest[tp]              # discovered since: from its beginning, as Spark
            elif tp in fresh:
                b = earliest[tp]              # a new incarnation of the number: not data loss
                reset.add(tp)
            elif b > latest[tp]:
                # The partition is not the one we read (KIP-253: drained, removed and created
                # again at this index, unseen by the lineage check) or its log was truncated.
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
            present = {n: dataclasses.replace(i, partitions=tuple(
                p for p in i.partitions if TopicPartition(n, p) in begin)) for n, i in topics.items()}
            held = await ordering.caps(admin, present, begin, earliest, latest)
            for tp, c in held.items():
                if tp in cap:
                    cap[tp] = max(begin[tp], min(cap[tp], c))
        ids = {n: i.topic_id for n, i in topics.items() if i.topic_id}
        return begin, cap, reset, {tp: epochs[tp] for tp in tps}, ids
    begin, cap, reset, epochs, ids = _kafka.run_with_admin(opts.client, go)
    available = sum(cap[tp] - begin[tp] for tp in cap)
    # availableNow: Spark hands Python sources ReadAllAvailable, yet Spark's Kafka source still
    # splits the backlog by maxOffsetsPerTrigger (and never waits for minOffsetsPerTrigger).
    limited = target is not None or (limit is not None and not isinstance(limit, ReadAllAvailable))
    if limited and target is None and opts.min_offsets_per_trigger and available < opts.min_offsets_per_trigger \
            and since_last_batch_s * 1000 < opts.max_trigger_delay_ms and not reset:
        return start_json, 0
    if limited and opts.max_offsets_per_trigger:
        cap = rate_limit(begin, cap, opts.max_offsets_per_trigger)
    end = dict(cap)
    for tp in reset:
        end[tp] = min(end[tp], begin[tp])     # one empty step re-bases it (end < start: see below)
    rows = sum(end[tp] - begin[tp] for tp in end)
    closed = {tp for tp in start if tp not in end}
    if rows == 0 and not reset and all(start.get(tp) == end[tp] for tp in end):
        return start_json, 0
    for tp in closed:
        end[tp] = start[tp]                   # gone: its range closed where the query stood
    known = Lineage(epochs={**{tp: e for tp, e in seen.epochs.items() if tp in closed}, **epochs},
                    closed=closed, topic_ids={**seen.topic_ids, **ids})
    return {**to_json_offsets(end), **known.to_json()}, rows


def batch_ranges(opts: SourceOptions, start_json: dict, end_json: dict,
                 replayed: bool = False) -> dict[TopicPartition, tuple[int, int]]:
    """[begin, end) per partition of a planned micro-batch (also when re-planned after a restart).

    `replayed`: planned by an earlier run of the query (Spark replays the last micro-batch
    after a restart): a partition removed since, or whose number is a new incarnation now, is
    skipped; its planned records were drained before it went (KIP-253 removes only drained
    partitions), and the new log's offsets are not the planned ones."""
    start, end = from_json_offsets(start_json), from_json_offsets(end_json)
    closed = Lineage.from_json(end_json).closed
    fresh = [tp for tp in end if tp not in closed and (start.get(tp) is None or end[tp] < start[tp])]

    async def go(admin):
        earliest = await _kafka._offsets(admin, {tp: EARLIEST for tp in fresh}, drop_missing=True)
        if not replayed:
            return earliest, set()
        topics = await _kafka._topics(admin, sorted({tp.topic for tp in end}), None, None)
        epochs: dict[TopicPartition, int] = {}
        live = [tp for tp in end if tp not in closed]
        latest = await _kafka._offsets(admin, {tp: LATEST for tp in live if tp.topic in topics},
                                       drop_missing=True, leader_epochs=epochs)
        new, unknown = await lineage.new_lineages(admin, topics, end, Lineage.from_json(end_json),
                                                  epochs)
        gone = {tp for tp in live if tp not in latest} | new | unknown
        return earliest, gone
    earliest, skip = _kafka.run_with_admin(opts.client, go) if fresh or replayed else ({}, set())
    if skip:
        log.info("replayed micro-batch: skipping %s (removed or created again since)", sorted(skip))
    out = {}
    for tp, e in end.items():
        if tp in closed or tp in skip or (tp in fresh and tp not in earliest):
            continue
        b = earliest[tp] if tp in earliest else start[tp]
        if e > b:
            out[tp] = (b, e)
    return out
