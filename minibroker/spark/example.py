"""The pipeline example: a topic into a parquet table (batch), and a transformed stream back into
another topic (Structured Streaming), through format("minibroker").

    python -m minibroker serve &                        # prints BOOTSTRAP 127.0.0.1:9092,...
    python -m minibroker.spark.example --bootstrap 127.0.0.1:9092 --demo 10000 \
        --source orders --table /tmp/orders.parquet --sink orders-upper --checkpoint /tmp/orders-ckpt

`--demo N` first writes N keyed records to `--source` (with Spark's sink).  Then:
1. batch: every record of `--source` -> parquet at `--table` (key, value, partition, offset, ...);
2. streaming: `--source` -> upper-cased values -> `--sink`, keyed as before (so KIP-253 linear
   hashing keeps each key in one partition), with `trigger(availableNow=True)` and a checkpoint:
   run it again and only records produced since are copied (drop --demo for that).
`--master spark://host:7077` runs it on a standalone cluster (see the README).
"""
from __future__ import annotations

import argparse

from pyspark.sql import SparkSession

from minibroker.spark import register
from minibroker.spark.session import local_session


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m minibroker.spark.example")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--source", default="orders")
    ap.add_argument("--table", default="/tmp/minibroker-orders.parquet")
    ap.add_argument("--sink", default="orders-upper")
    ap.add_argument("--checkpoint", default="/tmp/minibroker-orders-ckpt")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--demo", type=int, default=0, help="first write this many records to --source")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=100_000)
    a = ap.parse_args(argv)

    if a.master.startswith("local"):
        spark = local_session(a.master, "minibroker-example")
    else:                                   # a real cluster: its own addresses, not loopback
        spark = SparkSession.builder.master(a.master).appName("minibroker-example").getOrCreate()
        register(spark)
    kafka = {"kafka.bootstrap.servers": a.bootstrap}

    if a.demo:
        (spark.range(a.demo).selectExpr("CAST(concat('customer-', CAST(id % 100 AS STRING)) AS BINARY) AS key",
                                         "concat('order ', CAST(id AS STRING)) AS value")
         .write.format("minibroker").options(**kafka).option("topic", a.source).mode("append").save())

    # 1. batch: the whole topic into a parquet table
    df = spark.read.format("minibroker").options(**kafka).option("subscribe", a.source).load()
    df.selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "partition",
                  "offset", "timestamp", "leaderEpoch").write.mode("overwrite").parquet(a.table)
    print(f"{spark.read.parquet(a.table).count()} records of {a.source} in {a.table}")

    # 2. streaming: transform and write back, exactly the records not yet copied (checkpoint)
    q = (spark.readStream.format("minibroker").options(**kafka).option("subscribe", a.source)
         .option("startingOffsets", "earliest")
         .option("maxOffsetsPerTrigger", a.max_offsets_per_trigger).load()
         .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
         .writeStream.format("minibroker").options(**kafka).option("topic", a.sink)
         .option("checkpointLocation", a.checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()
    copied = sum(p["numInputRows"] for p in q.recentProgress)
    print(f"{copied} records copied from {a.source} to {a.sink} (upper-cased)")
    spark.stop()


if __name__ == "__main__":
    main()
