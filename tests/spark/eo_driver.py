"""A streaming copy topic -> topic through the minibroker sink, as its own process (kill -9-able).

    python eo_driver.py BOOTSTRAP SRC DST CHECKPOINT WORKDIR EXACTLY_ONCE FAIL_AT HOLD_AT

local[2,3]: a failed task is retried (up to 3 attempts). The first attempt of the task that meets
value FAIL_AT raises (once per WORKDIR: an injected Spark task failure, mid-write). The task that
meets HOLD_AT first (once per WORKDIR, WORKDIR/held) stops there, so that the test's kill -9
lands inside a micro-batch. Runs until
WORKDIR/stop exists.
"""
from __future__ import annotations

import os
import sys
import time

# Python workers that start slowly on a loaded machine still connect (the default is 15 s).
SLOW_MACHINE = {"spark.python.authenticate.socketTimeout": "180s"}


def main() -> None:
    bootstrap, src, dst, ckpt, work, exactly, fail_at, hold_at = sys.argv[1:9]
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    from minibroker.spark.session import local_session
    spark = local_session("local[2,3]", "minibroker-eo-driver", conf=SLOW_MACHINE)
    flag, held = os.path.join(work, "failed-once"), os.path.join(work, "held")
    target, hold = int(fail_at), int(hold_at)

    @F.udf("string")
    def passthrough(v):
        if int(v) == target and TaskContext.get().attemptNumber() == 0 \
                and not os.path.exists(flag):
            open(flag, "w").close()
            raise RuntimeError(f"injected task failure at value {v}")
        if int(v) == hold and not os.path.exists(held):
            # The first run stops here, inside a micro-batch, until the test kills it: the
            # kill lands mid-batch however fast or slow the machine is.
            open(held, "w").close()
            end = time.monotonic() + 600
            while time.monotonic() < end and os.getppid() != 1:   # orphaned once killed
                time.sleep(0.5)
        return v

    def start():
        return (spark.readStream.format("minibroker").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", src).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", 40000).load()
                .select(passthrough(F.col("value").cast("string")).alias("value"))
                .writeStream.format("minibroker").option("kafka.bootstrap.servers", bootstrap)
                .option("topic", dst).option("exactlyOnce", exactly)
                .option("checkpointLocation", ckpt).trigger(processingTime="500 milliseconds").start())

    q = start()
    restarts = 0
    print("STARTED", q.id, flush=True)
    while not os.path.exists(os.path.join(work, "stop")):
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
