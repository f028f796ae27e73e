"""A streaming query's driver as its own process, so a test can `kill -9` it and start it again.

    python stream_driver.py BOOTSTRAP TOPIC CHECKPOINT OUTDIR ORDERED

Reads TOPIC from the earliest offset (maxOffsetsPerTrigger 600) and writes each micro-batch's
rows (key, value, partition, offset) to OUTDIR/batch-<id>.json, like an idempotent sink (Delta's
txnVersion): a micro-batch id already written is not written again, so a batch replayed after a
restart leaves the first complete write. Runs until OUTDIR/stop exists.
"""
from __future__ import annotations

import json
import os
import sys
import time

# Python workers that start slowly on a loaded machine still connect (the default is 15 s).
SLOW_MACHINE = {"spark.python.authenticate.socketTimeout": "180s"}


def main() -> None:
    bootstrap, topic, ckpt, out, ordered = sys.argv[1:6]
    from minibroker.spark.session import local_session
    spark = local_session("local[2]", "minibroker-stream-driver", conf=SLOW_MACHINE)

    def sink(df, batch_id):
        path = os.path.join(out, f"batch-{batch_id:06d}.json")
        rows = [(bytes(r.key).decode(), int(r.value), r.partition, r.offset)
                for r in df.select("key", "value", "partition", "offset").collect()]
        if os.path.exists(path):
            return
        with open(path + ".tmp", "w") as f:
            json.dump(rows, f)
        os.replace(path + ".tmp", path)

    def start():
        return (spark.readStream.format("minibroker").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", 600).option("orderedDelivery", ordered)
                .load().selectExpr("key", "CAST(value AS STRING) AS value", "partition", "offset")
                .writeStream.foreachBatch(sink).option("checkpointLocation", ckpt)
                .trigger(processingTime="250 milliseconds").start())

    q = start()
    restarts = 0
    print("STARTED", flush=True)
    while not os.path.exists(os.path.join(out, "stop")):
        if not q.isActive:
            # An overloaded machine: Spark gave up on a Python worker starting. Restart from
            # the checkpoint, as a supervisor would; any other failure fails the test.
            if "failed to connect back" in str(q.exception()) and restarts < 3:
                restarts += 1
                print("RESTART after", str(q.exception())[:120], flush=True)
                q = start()
                continue
            print("QUERY FAILED", q.exception(), flush=True)
            sys.exit(3)
        time.sleep(0.2)
    q.stop()
    spark.stop()


if __name__ == "__main__":
    main()
