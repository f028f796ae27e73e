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
with Spark's own Kafka sink, until the broker has transactions.

Per row this does only what the producer needs: the arrow columns become Python lists once per
record batch and each record is handed to `Producer.send`.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pyarrow as pa

from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)

from minibroker.client import Producer


@dataclass
class SinkOptions:
    bootstrap: str
    topic: str | None
    linger_ms: int
    batch_size: int
    compression: str | None
    max_in_flight: int


def parse_sink(options) -> SinkOptions:
    opts = {str(k).lower(): v for k, v in dict(options).items()}
    if not opts.get("kafka.bootstrap.servers"):
        raise ValueError("option 'kafka.bootstrap.servers' is required")
    return SinkOptions(bootstrap=opts["kafka.bootstrap.servers"], topic=opts.get("topic") or None,
                       linger_ms=int(opts.get("kafka.linger.ms", 5)),
                       batch_size=int(opts.get("kafka.batch.size", 262144)),
                       compression=opts.get("kafka.compression.type") or None,
                       max_in_flight=int(opts.get("kafka.max.in.flight.requests.per.connection", 5)))


@dataclass
class SinkCommit(WriterCommitMessage):
    records: int
    partitions: dict                     # (topic, partition) -> records


def check_schema(schema, default_topic: str | None) -> None:
    names = {f.name for f in schema.fields}
    if "value" not in names:
        raise ValueError("the sink needs a 'value' column (string or binary)")
    if "topic" not in names and not default_topic:
        raise ValueError("no 'topic' column and no 'topic' option: where should rows go?")


def _bytes_list(col) -> list:
    if col is None:
        return []
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary())
    return col.to_pylist()


async def _write(opts: SinkOptions, batches) -> SinkCommit:
    counts: dict = {}
    total = 0
    async with Producer(opts.bootstrap, acks=-1, enable_idempotence=True, linger_ms=opts.linger_ms,
                        batch_size=opts.batch_size, compression=opts.compression,
                        max_in_flight=opts.max_in_flight, client_id="minibroker-spark-sink") as p:
        pending: list = []
        for rb in batches:
            n = rb.num_rows
            if n == 0:
                continue
            names = rb.schema.names
            values = _bytes_list(rb.column(names.index("value")))
            keys = _bytes_list(rb.column(names.index("key"))) if "key" in names else [None] * n
            topics = rb.column(names.index("topic")).to_pylist() if "topic" in names else None
            parts = rb.column(names.index("partition")).to_pylist() if "partition" in names else None
            headers = rb.column(names.index("headers")).to_pylist() if "headers" in names else None
            send = p.send
            default = opts.topic
            for i in range(n):
                t = topics[i] if topics is not None and topics[i] is not None else default
                if t is None:
                    raise ValueError("row without a topic and no 'topic' option")
                h = headers[i] if headers is not None else None
                pending.append(send(t, values[i], key=keys[i],
                                    headers=[(x["key"], x["value"]) for x in h] if h else None,
                                    partition=parts[i] if parts is not None else None))
            total += n
            if len(pending) >= 200_000:          # bound memory: wait for acks now and then
                for md in await asyncio.gather(*pending):
                    counts[(md.topic, md.partition)] = counts.get((md.topic, md.partition), 0) + 1
                pending = []
        for md in await asyncio.gather(*pending):
            counts[(md.topic, md.partition)] = counts.get((md.topic, md.partition), 0) + 1
    return SinkCommit(total, counts)


class _Writer:
    def __init__(self, opts: SinkOptions, schema) -> None:
        check_schema(schema, opts.topic)
        self.opts = opts

    def write(self, iterator):
        return asyncio.run(_write(self.opts, iterator))


class KafkaBatchWriter(_Writer, DataSourceArrowWriter):
    def commit(self, messages) -> None:
        pass            # every acknowledged record is already durable (acks=all)

    def abort(self, messages) -> None:
        pass            # what was acknowledged stays: at least once, like Spark's Kafka sink


class KafkaStreamWriter(_Writer, DataSourceStreamArrowWriter):
    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass
