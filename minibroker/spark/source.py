"""`format("minibroker")`: the Kafka source (batch and Structured Streaming) and sink for PySpark.

Mirrors Spark's Kafka connector (options, columns, Kafka-style JSON offsets) through Spark's Python
Data Source API, plus a `leaderEpoch` column and KIP-253 ordered delivery (`orderedDelivery`,
minibroker.spark.ordering).  Where each method runs matters:
- `DataSource.__init__` / `schema()` and batch `partitions()`: short-lived Python processes;
- streaming `initialOffset` / `latestOffset` / `partitions` / `commit`: one long-lived runner
  process per query, holding this reader (so `_target` and `_last_batch_at` persist there);
- `read(partition)`: worker processes, on a freshly unpickled reader: everything it needs is in
  the options and the `KafkaInputPartition`.  Nothing refers to the user's driver process.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from minibroker.client import TopicPartition
from minibroker.spark import _kafka, exactly_once
from minibroker.spark.arrow import to_record_batch
from minibroker.spark.planner import batch_ranges, latest_offsets, plan_end
from minibroker.spark.option_table import OptionError
from minibroker.spark.save_mode import install as install_save_mode
from minibroker.spark.sink import KafkaBatchWriter, KafkaStreamWriter, parse_sink
from minibroker.spark.options import (EARLIEST, LATEST, Spec, SourceOptions, from_json_offsets,
                                      parse, to_json_offsets)

log = logging.getLogger("minibroker.spark")

BASE_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
               "timestamp timestamp, timestampType int")
HEADERS = "headers array<struct<key: string, value: binary>>"


def schema_ddl(include_headers: bool) -> str:
    return BASE_SCHEMA + (", " + HEADERS if include_headers else "") + ", leaderEpoch int"


@dataclass
class KafkaInputPartition(InputPartition):
    """Offsets [start, end) of one topic-partition (a large range is split into several)."""
    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        super().__init__(None)


# ---------------------------------------------------------------------------- offsets
async def resolve(admin, topics: dict[str, _kafka.TopicInfo], spec: Spec,
                  what: str) -> dict[TopicPartition, int]:
    """The offset of every topic-partition for a starting or ending spec."""
    tps = [TopicPartition(t, p) for t, info in sorted(topics.items()) for p in info.partitions]
    if spec.kind in ("earliest", "latest"):
        return await _kafka._offsets(admin, {tp: EARLIEST if spec.kind == "earliest" else LATEST
                                             for tp in tps})
    if spec.kind == "offsets":
        missing = [tp for tp in tps if tp not in spec.offsets]
        if missing:
            raise ValueError(f"{what}: specific offsets must name every partition; missing "
                             f"{[f'{t}-{p}' for t, p in missing]}")
        named = {tp: spec.offsets[tp] for tp in tps if spec.offsets[tp] in (EARLIEST, LATEST)}
        out = {tp: spec.offsets[tp] for tp in tps}
        out.update(await _kafka._offsets(admin, named))
        return out
    stamps = {tp: spec.timestamp for tp in tps} if spec.kind == "timestamp" else \
        {tp: spec.offsets[tp] for tp in tps if tp in spec.offsets}
    if spec.kind == "timestamps":
        missing = [tp for tp in tps if tp not in spec.offsets]
        if missing:
            raise ValueError(f"{what}: timestamps must name every partition; missing {missing}")
    got = await admin.list_offsets(stamps)
    out = {}
    latest_needed = []
    for tp in tps:
        off = got[tp][0]
        if off < 0:
            if spec.strategy == "error":
                raise ValueError(f"{what}: no record at or after timestamp {stamps[tp]} in "
                                 f"{tp.topic}-{tp.partition} (set the strategy to 'latest' to "
                                 f"start there instead)")
            latest_needed.append(tp)
        else:
            out[tp] = off
    out.update(await _kafka._offsets(admin, {tp: LATEST for tp in latest_needed}))
    return out


def split_ranges(ranges: dict[TopicPartition, tuple[int, int]], max_records: int,
                 min_partitions: int | None) -> list[KafkaInputPartition]:
    """One input partition per topic-partition, large ranges cut into pieces of <= max_records;
    with minPartitions, the largest ranges are cut further until there are that many pieces."""
    pieces = {tp: max(1, -(-(e - s) // max_records)) for tp, (s, e) in ranges.items() if e > s}
    if min_partitions:
        while sum(pieces.values()) < min_partitions:
            tp = max(pieces, key=lambda t: ((ranges[t][1] - ranges[t][0]) / pieces[t], t),
                     default=None)
            if tp is None or (ranges[tp][1] - ranges[tp][0]) <= pieces[tp]:
                break
            pieces[tp] += 1
    out = []
    for tp in sorted(pieces):
        s, e = ranges[tp]
        n = pieces[tp]
        bounds = [s + (e - s) * i // n for i in range(n + 1)]
        out.extend(KafkaInputPartition(tp.topic, tp.partition, bounds[i], bounds[i + 1])
                   for i in range(n))
    return out


def read_partition(opts: SourceOptions, part: KafkaInputPartition):
    for cols in _kafka.fetch_range(opts.client, part.topic, part.partition, part.start, part.end,
                                   fail_on_data_loss=opts.fail_on_data_loss,
                                   with_headers=opts.include_headers,
                                   max_bytes=opts.fetch_max_bytes):
        yield to_record_batch(cols, part.topic, part.partition, opts.include_headers)


# ---------------------------------------------------------------------------- batch
class KafkaBatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self):
        o = self.opts

        async def plan(admin):
            topics = await _kafka._topics(admin, o.subscribe, o.pattern, o.assign)
            starts = await resolve(admin, topics, o.starting, "startingOffsets")
            ends = await resolve(admin, topics, o.ending, "endingOffsets")
            return starts, ends

        starts, ends = _kafka.run_with_admin(o.client, plan)
        ranges = {tp: (starts[tp], ends[tp]) for tp in starts if tp in ends}
        for tp, (s, e) in ranges.items():
            if s > e:
                raise ValueError(f"{tp.topic}-{tp.partition}: starting offset {s} is after the "
                                 f"ending offset {e}")
        parts = split_ranges(ranges, o.max_records_per_partition, o.min_partitions)
        return parts or [KafkaInputPartition("", -1, 0, 0)]

    def read(self, partition: KafkaInputPartition):
        if partition.partition < 0:
            return iter(())
        return read_partition(self.opts, partition)


# ---------------------------------------------------------------------------- streaming
class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._target: dict[TopicPartition, int] | None = None     # availableNow's end
        self._last_batch_at: float | None = None                  # minOffsetsPerTrigger
        self._planned: list[dict] = []      # ends this reader planned (others are replays)

    def initialOffset(self) -> dict:
        o = self.opts

        async def go(admin):
            topics = await _kafka._topics(admin, o.subscribe, o.pattern, o.assign)
            return await resolve(admin, topics, o.starting, "startingOffsets")
        return to_json_offsets(_kafka.run_with_admin(o.client, go))

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = latest_offsets(self.opts)

    def latestOffset(self, start: dict, limit=None) -> dict:
        if self._last_batch_at is None:
            self._last_batch_at = time.monotonic()
        end, new_rows = plan_end(self.opts, start, limit, self._target,
                                 time.monotonic() - self._last_batch_at)
        if new_rows:
            self._last_batch_at = time.monotonic()
        self._planned = (self._planned + [end])[-4:]
        return end

    def getDefaultReadLimit(self):
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self):
        return None

    def partitions(self, start: dict, end: dict):
        ranges = batch_ranges(self.opts, start, end, replayed=end not in self._planned)
        return split_ranges(ranges, self.opts.max_records_per_partition, self.opts.min_partitions)

    def read(self, partition: KafkaInputPartition):
        return read_partition(self.opts, partition)

    def commit(self, end: dict) -> None:
        pass                         # like Spark's Kafka source: offsets live in the checkpoint

    def stop(self) -> None:
        pass


# ---------------------------------------------------------------------------- the data source
class MinibrokerDataSource(DataSource):
    """format("minibroker"): Spark's Kafka source and sink options over the Kafka protocol."""

    @classmethod
    def name(cls) -> str:
        return "minibroker"

    def schema(self):
        opts = {str(k).lower(): v for k, v in dict(self.options).items()}
        return schema_ddl(str(opts.get("includeheaders", "false")).strip().lower() == "true")

    def reader(self, schema):
        return KafkaBatchReader(parse(self.options, streaming=False))

    def streamReader(self, schema):
        return KafkaStreamReader(parse(self.options, streaming=True))

    def writer(self, schema, overwrite: bool):
        return KafkaBatchWriter(_sink_options(self.options, overwrite), schema)

    def streamWriter(self, schema, overwrite: bool):
        return KafkaStreamWriter(_sink_options(self.options, overwrite), schema)


def _sink_options(options, overwrite: bool):
    if overwrite:
        raise OptionError("save mode Overwrite is not allowed for a minibroker sink (a Kafka "
                          "topic is appended to, never replaced): use mode('append'), as with "
                          "Spark's Kafka sink")
    opts = parse_sink(options)
    _kafka.probe(opts.client)           # here on the driver: a refused connection fails the job now
    if opts.exactly_once:
        _kafka.run_with_admin(opts.client, exactly_once.ensure_marker_topic)
    return opts
