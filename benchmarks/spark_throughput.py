#!/usr/bin/env python3
"""Spark batch read and write of 100-byte records through format("minibroker"), side by side with a
confluent-kafka (librdkafka) consumer and producer on the same broker, in the same run.

    python benchmarks/spark_throughput.py [--records 1000000] [--size 100] [--partitions 4]
                                          [--master local[2]]

Starts `python -m minibroker serve --brokers 1 --port 0` (one broker, so the broker is the same
for both clients), then, in this order: confluent-kafka produces --records keyless values of --size
bytes to topic `bench-ck` (acks=all, linger 5 ms); Spark writes the same number to `bench-spark`
(`spark.range` -> value column -> `df.write.format("minibroker")`, one task per Spark core);
confluent-kafka consumes `bench-ck` from the beginning; Spark reads `bench-ck` in batch
(`sum(length(value))`, so every value is materialised).  A small Spark job warms the JVM and the
Python workers first; session start-up is not counted.  Prints records/s and Spark/confluent
ratios.  Needs the `spark` and `test` extras (confluent-kafka).  The machine may be shared: run it
more than once before trusting a figure.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_broker():
    proc = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "1", "--port", "0"],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    line = proc.stdout.readline()
    assert line.startswith("BOOTSTRAP "), line
    return proc, line.split()[1]


def create_topics(bootstrap: str, names, partitions: int) -> None:
    from minibroker.client import Admin, NewTopic

    async def go():
        async with Admin(bootstrap) as a:
            await a.create_topics([NewTopic(n, partitions, 1) for n in names])
    asyncio.run(go())


def ck_produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": 1000000, "queue.buffering.max.messages": 1000000, "log_level": 3})
    value = os.urandom(size)
    t = time.perf_counter()
    sent = 0
    while sent < n:
        try:
            p.produce(topic, value)
            sent += 1
        except BufferError:
            p.poll(0.01)
    assert p.flush(120) == 0
    return time.perf_counter() - t


def ck_consume(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800, "log_level": 3})
    c.subscribe([topic])
    got, nbytes = 0, 0
    t = time.perf_counter()
    while got < n and time.perf_counter() - t < 600:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
    dt = time.perf_counter() - t
    c.close()
    assert got == n, got
    return dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args()
    proc, bootstrap = start_broker()
    try:
        create_topics(bootstrap, ["bench-ck", "bench-spark"], a.partitions)
        from minibroker.spark.session import local_session
        spark = local_session(a.master, "minibroker-bench")
        spark.range(1000, numPartitions=2).selectExpr("CAST(id AS STRING) AS value") \
            .write.format("minibroker").option("kafka.bootstrap.servers", bootstrap) \
            .option("topic", "bench-spark").mode("append").save()       # warm-up (not counted)
        warm = spark.read.format("minibroker").option("kafka.bootstrap.servers", bootstrap) \
            .option("subscribe", "bench-spark").load().count()
        assert warm == 1000

        ck_w = ck_produce(bootstrap, "bench-ck", a.records, a.size)
        t = time.perf_counter()
        cores = spark.sparkContext.defaultParallelism
        (spark.range(a.records, numPartitions=cores)
         .selectExpr(f"CAST(repeat('x', {a.size}) AS BINARY) AS value")
         .write.format("minibroker").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", "bench-spark").mode("append").save())
        sp_w = time.perf_counter() - t
        ck_r = ck_consume(bootstrap, "bench-ck", a.records)
        t = time.perf_counter()
        row = spark.read.format("minibroker").option("kafka.bootstrap.servers", bootstrap) \
            .option("subscribe", "bench-ck").load() \
            .selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]
        sp_r = time.perf_counter() - t
        assert row.n == a.records and row.b == a.records * a.size, row
        n = a.records
        print(f"{n} records of {a.size} B, {a.partitions} partitions, Spark {a.master}, 1 minibroker broker")
        print(f"write: confluent-kafka {n / ck_w:10.0f} rec/s ({ck_w:.1f} s)  "
              f"spark {n / sp_w:10.0f} rec/s ({sp_w:.1f} s)  ratio {ck_w / sp_w:.2f}")
        print(f"read:  confluent-kafka {n / ck_r:10.0f} rec/s ({ck_r:.1f} s)  "
              f"spark {n / sp_r:10.0f} rec/s ({sp_r:.1f} s)  ratio {ck_r / sp_r:.2f}")
        spark.stop()
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


if __name__ == "__main__":
    main()
