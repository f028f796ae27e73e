"""The sink: `df.write.format("minibroker")` and `writeStream.format("minibroker")`.

Columns as Spark's Kafka sink: `value` (required; string or binary), `key` (optional; null keys are
spread round-robin), `headers` (optional, array<struct<key: string, value: binary>>), `topic`
(optional; else the `topic` option), `partition` (optional; else the partitioner).  Keyed rows are
partitioned by KIP-253 linear hashing over the topic's initial and undeleted partition counts (the
reference producer's partitioner: Kafka's murmur2 partitioning while a topic never changed its
count, and on stock brokers), so per-key order survives partition expansion and deletion.

Each Spark task writes its rows with one idempotent producer (acks=all, enable_idempotence): broker
retries inside a task never duplicate.  A Spark task that fails and is retried writes its rows
again, and a streaming micro-batch replayed after a crash too: delivery is **at least once**, as
with Spark's own Kafka sink, unless `exactlyOnce=true`: then each task writes in a transaction
with a commit marker, and a replayed task that finds its marker writes nothing
(minibroker.spark.exactly_once).

Vectorised (minibroker.spark.encode): per Arrow batch the partitions are computed for all rows at
once, rows are ordered by partition (stably, so a key's rows keep their order), and each partition's
records are encoded into whole v2 record batches from the columns; the reference producer
sends them pipelined (`kafka.max.in.flight.requests.per.connection` requests per broker) while the
next Arrow batch is read and encoded.  If the topic's undeleted
partition count changes during the write, the task waits for what is in flight, and partitions the
refused rows again, in their order, before it writes more.
"""
from __future__ import annotations

import asyncio
import secrets
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from kafka import codec as kafka_codec

from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)

from minibroker.client import Producer
from minibroker.client.kip253 import kip253_counts
from minibroker.client.producer import StalePartitioningError
from minibroker.client.records import codec_id, frame_batch
from minibroker.spark import exactly_once, option_table
from minibroker.spark.option_table import OptionError
from minibroker.spark.security import ClientConf, client_conf
from minibroker.spark.encode import (binary_column, encode_records, header_blobs, key_partitions,
                                     record_slices)

_COMPRESS = {1: kafka_codec.gzip_encode, 2: kafka_codec.snappy_encode,
             3: kafka_codec.lz4_encode, 4: kafka_codec.zstd_encode}
_MAX_PENDING_BYTES = 64 << 20           # encoded but unacknowledged, per task


@dataclass
class SinkOptions:
    bootstrap: str
    topic: str | None
    linger_ms: int
    batch_size: int
    compression: str | None
    max_in_flight: int
    acks: int = -1
    client: ClientConf = None
    exactly_once: bool = False


_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def parse_sink(options) -> SinkOptions:
    opts = {str(k).lower(): v for k, v in dict(options).items()}
    option_table.check(opts, "sink")
    if not opts.get("kafka.bootstrap.servers"):
        raise ValueError("option 'kafka.bootstrap.servers' is required")
    acks = str(opts.get("kafka.acks", "all")).strip().lower()
    if acks not in _ACKS:
        raise OptionError(f"kafka.acks must be all, -1, 1 or 0, not {opts['kafka.acks']!r}")
    sink = SinkOptions(bootstrap=opts["kafka.bootstrap.servers"], topic=opts.get("topic") or None,
                       linger_ms=5,
                       batch_size=_number(opts, "kafka.batch.size", 262144, 1),
                       compression=opts.get("kafka.compression.type") or None,
                       max_in_flight=_number(opts, "kafka.max.in.flight.requests.per.connection",
                                             5, 1),
                       acks=_ACKS[acks], client=client_conf(opts, "minibroker-spark-sink"),
                       exactly_once=str(opts.get("exactlyonce", "false")).strip().lower() == "true")
    if sink.exactly_once and sink.acks != -1:
        raise OptionError("exactlyOnce=true writes transactions, which need kafka.acks=all")
    codec_id(sink.compression)          # an unknown or missing codec fails here, on the driver
    return sink


def _number(opts: dict, name: str, default: int, least: int) -> int:
    v = opts.get(name)
    if v in (None, ""):
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        n = least - 1
    if n < least:
        raise OptionError(f"{name} must be an integer >= {least}, not {v!r}")
    return n


@dataclass
class SinkCommit(WriterCommitMessage):
    records: int
    partitions: dict                     # (topic, partition) -> records
    rewritten: int = 0                   # rows partitioned again after a partition count change


def check_schema(schema, default_topic: str | None) -> None:
    names = {f.name for f in schema.fields}
    if "value" not in names:
        raise ValueError("the sink needs a 'value' column (string or binary)")
    if "topic" not in names and not default_topic:
        raise ValueError("no 'topic' column and no 'topic' option: where should rows go?")


def _build(records, count: int, ts: int, compression: int, pid: int, epoch: int,
           seq: int) -> bytes:
    if compression:
        return frame_batch(_COMPRESS[compression](bytes(records)), count, ts, ts, pid, epoch, seq,
                           attributes=compression)
    return frame_batch(records, count, ts, ts, pid, epoch, seq)


def _topic_rows(rb: pa.RecordBatch, default: str | None) -> list[tuple[str, pa.RecordBatch]]:
    """The batch split by destination topic (the `topic` column, else the option)."""
    if "topic" not in rb.schema.names:
        return [(default, rb)]
    if default is not None:
        return [(default, rb)]          # the option wins over the column, as in Spark's sink
    topics = rb.column(rb.schema.names.index("topic"))
    if topics.null_count:
        raise ValueError("row without a topic and no 'topic' option")
    enc = topics.dictionary_encode()
    names = enc.dictionary.to_pylist()
    if len(names) == 1:
        return [(names[0], rb)]
    idx = enc.indices.to_numpy(zero_copy_only=False)
    return [(t, rb.take(pa.array(np.flatnonzero(idx == i)))) for i, t in enumerate(names)]


class _Plan:
    """One topic's rows of one Arrow batch, ordered by partition and cut into record batches."""

    def __init__(self, rb: pa.RecordBatch, counts: tuple[int, int], partitions: int, rr: int,
                 batch_size: int) -> None:
        names = rb.schema.names
        n = rb.num_rows
        col = {c: rb.column(names.index(c)) for c in ("key", "value", "headers", "partition")
               if c in names}
        values = binary_column(col["value"])
        keys = binary_column(col["key"]) if "key" in col else None
        headers = header_blobs(col["headers"]) if "headers" in col else None
        part = np.full(n, -1, np.int64)
        if "partition" in col:
            given = pc.fill_null(col["partition"].cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
            bad = (given >= partitions) | (given < -1)
            if bad.any():
                raise ValueError(f"partition {int(given[bad][0])} does not exist "
                                 f"({partitions} partitions)")
            part[:] = given
        size = pc.fill_null(pc.binary_length(values), 0).to_numpy(zero_copy_only=False) + 8
        if keys is not None:
            size = size + pc.fill_null(pc.binary_length(keys), 0).to_numpy(zero_copy_only=False)
            keyed = (part < 0) & np.asarray(keys.is_valid())
            if keyed.any():
                part[keyed] = key_partitions(keys, *counts)[keyed]
        unkeyed = part < 0                      # sticky runs of ~batch_size bytes, round-robin
        self.rr = rr
        if unkeyed.any():
            runs = np.cumsum(size[unkeyed]) // batch_size
            part[unkeyed] = (rr + runs) % counts[1]
            self.rr = rr + int(runs[-1]) + 1
        perm = np.argsort(part, kind="stable")
        sp = part[perm]
        before = np.cumsum(size[perm]) - size[perm]            # bytes before each row
        new_part = np.r_[True, sp[1:] != sp[:-1]]
        group_start = np.maximum.accumulate(np.where(new_part, np.arange(n), 0))
        chunk = (before - before[group_start]) // batch_size
        starts = np.flatnonzero(new_part | np.r_[True, chunk[1:] != chunk[:-1]])
        ends = np.r_[starts[1:], n]
        deltas = np.arange(n) - np.repeat(starts, ends - starts)
        take = pa.array(perm)
        records = encode_records(keys.take(take) if keys is not None else None, values.take(take),
                                 headers.take(take) if headers is not None else None, deltas)
        self.offsets, self.data = record_slices(records)
        self.perm, self.starts, self.ends, self.partitions = perm, starts, ends, sp[starts]

    def batches(self):
        """(partition, record count, encoded records, original row indices) per record batch."""
        off, data = self.offsets, self.data
        for s, e, p in zip(self.starts.tolist(), self.ends.tolist(), self.partitions.tolist()):
            yield p, e - s, data.slice(int(off[s]), int(off[e] - off[s])), self.perm[s:e]


class _Task:
    """One Spark task's write: each Arrow batch is encoded, its record batches queued on the
    producer, and the event loop runs between Arrow batches (sends, acknowledgements)."""

    def __init__(self, opts: SinkOptions, producer: Producer) -> None:
        self.opts = opts
        self.compression = codec_id(opts.compression)
        self.producer = producer
        self.pending: deque = deque()     # (future, bytes, topic, rows, row indices, seq, count)
        self.pending_bytes = 0
        self.refused: list = []           # (seq, first row, topic, rows, row indices)
        self.used: dict[str, tuple] = {}
        self.rr: dict[str, int] = {}
        self.acked: dict = {}
        self.total = 0
        self.rewritten = 0

    async def _counts(self, topic: str) -> tuple[tuple[int, int], int, int]:
        md = self.producer.metadata.topic(topic)
        if md is None or md.error_code or not md.partitions:
            md = await self.producer.metadata.wait_for_topic(topic)
        ppc = md.producer_partition_count
        return kip253_counts(md) or (ppc, ppc), md.undeleted_partition_count, len(md.partitions)

    async def write_all(self, batches) -> None:
        """Every Arrow batch of the task, each read on a thread: reading blocks on Spark computing
        the next rows, and the event loop meanwhile sends and acknowledges what is queued (else
        it sits unsent until the next batch arrives, or the task is killed upstream)."""
        it = iter(batches)
        with ThreadPoolExecutor(1, thread_name_prefix="minibroker-sink-rows") as pool:
            loop, seq = asyncio.get_running_loop(), 0
            while (rb := await loop.run_in_executor(pool, next, it, None)) is not None:
                if rb.num_rows:
                    await self.write(rb, seq)
                seq += 1
        await self.drain()

    async def write(self, rb: pa.RecordBatch, seq: int) -> None:
        for topic, rows in _topic_rows(rb, self.opts.topic):
            counts, count, partitions = await self._counts(topic)
            if self.used.get(topic, counts) != counts:
                await self.drain()                # nothing with the old counts after this point
            self.used[topic] = counts
            await self._plan_and_send(topic, rows, seq, counts, count, partitions)

    async def _plan_and_send(self, topic: str, rows: pa.RecordBatch, seq: int, counts,
                             count: int, partitions: int) -> None:
        plan = _Plan(rows, counts, partitions, self.rr.get(topic, 0), self.opts.batch_size)
        self.rr[topic] = plan.rr
        ts = self.producer.clock.now_ms()
        for p, n, data, idx in plan.batches():
            build = partial(_build, data, n, ts, self.compression)
            fut = self.producer.send_batch(topic, p, n, build, count)
            self.pending.append((fut, data.size, topic, rows, idx, seq, n))
            self.pending_bytes += data.size
        await asyncio.sleep(0)                    # let the sender go
        while self.pending and (self.pending_bytes > _MAX_PENDING_BYTES or self.pending[0][0].done()):
            await self._settle_one()

    async def _settle_one(self) -> None:
        fut, size, topic, rows, idx, seq, n = self.pending.popleft()
        self.pending_bytes -= size
        try:
            md = await fut
        except StalePartitioningError:
            self.refused.append((seq, int(idx[0]), topic, rows, idx))
            return
        key = (md.topic, md.partition)
        self.acked[key] = self.acked.get(key, 0) + n
        self.total += n

    async def drain(self) -> None:
        """Wait for every batch; write refused rows again, in their order, with the new counts."""
        for _ in range(100):
            while self.pending:
                await self._settle_one()
            if not self.refused:
                return
            refused, self.refused = sorted(self.refused, key=lambda r: r[:2]), []
            for seq, _, topic, rows, idx in refused:
                self.rewritten += len(idx)
                await self.producer.metadata.refresh([topic])
                counts, count, partitions = await self._counts(topic)
                self.used[topic] = counts
                await self._plan_and_send(topic, rows.take(pa.array(np.sort(idx))), seq, counts,
                                          count, partitions)
        raise RuntimeError("the partition count kept changing while the sink wrote")


def _producer(opts: SinkOptions, transactional_id: str | None = None) -> Producer:
    return Producer(opts.bootstrap, acks=opts.acks, enable_idempotence=opts.acks == -1,
                    linger_ms=opts.linger_ms, batch_size=opts.batch_size,
                    max_in_flight=opts.max_in_flight, client_id=opts.client.client_id,
                    request_timeout_ms=opts.client.request_timeout_ms,
                    security=opts.client.client_security(), transactional_id=transactional_id)


async def _write(opts: SinkOptions, batches) -> SinkCommit:
    async with _producer(opts) as producer:
        task = _Task(opts, producer)
        await task.write_all(batches)
    return SinkCommit(task.total, task.acked, task.rewritten)


async def _write_exactly_once(opts: SinkOptions, batches, txn_id: str) -> SinkCommit:
    """The task's rows and its commit marker in one transaction, unless an earlier attempt of
    the same task committed (minibroker.spark.exactly_once)."""
    async with _producer(opts, txn_id) as producer:
        await producer.init_transactions()        # fences an earlier attempt, aborts its txn
        if await exactly_once.committed(producer, opts, txn_id) is not None:
            return SinkCommit(0, {}, 0)
        producer.begin_transaction()
        task = _Task(opts, producer)
        try:
            await task.write_all(batches)
            if task.rewritten:
                raise RuntimeError("the partition count changed during a transactional write; "
                                   "the task is retried")
            marker = producer.send(exactly_once.MARKERS,
                                   exactly_once.marker_value(task.total, task.acked),
                                   key=txn_id.encode(),
                                   partition=exactly_once.marker_partition(txn_id))
            await marker
            await producer.commit_transaction()
        except BaseException:
            try:
                await producer.abort_transaction()
            except Exception:  # noqa: BLE001 - fenced or closing: the coordinator aborts it
                pass
            raise
    return SinkCommit(task.total, task.acked, task.rewritten)


class _Writer:
    def __init__(self, opts: SinkOptions, schema) -> None:
        check_schema(schema, opts.topic)
        self.opts = opts
        # a batch write's id (a streaming task uses its query and micro-batch ids instead)
        self.write_id = secrets.token_hex(8) if opts.exactly_once else None

    def write(self, iterator):
        if self.opts.exactly_once:
            txn_id = exactly_once.transactional_id(exactly_once.task_write_id(self.write_id),
                                                   exactly_once.task_partition())
            return asyncio.run(_write_exactly_once(self.opts, iterator, txn_id))
        return asyncio.run(_write(self.opts, iterator))


class KafkaBatchWriter(_Writer, DataSourceArrowWriter):
    def commit(self, messages) -> None:
        pass            # every acknowledged record is already durable (acks=all)

    def abort(self, messages) -> None:
        pass            # what was acknowledged stays (at least once, like Spark's Kafka sink),
                        # or (exactlyOnce) committed transactions stay, aborted ones are hidden


class KafkaStreamWriter(_Writer, DataSourceStreamArrowWriter):
    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass
