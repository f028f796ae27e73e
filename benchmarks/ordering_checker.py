#!/usr/bin/env python3
"""The per-key ordering checker (minibroker.spark.checker) at 5M and 20M rows: pandas and Spark
back-ends on the same generated history with injected losses, duplicates and swaps; both must
report exactly the injected counts (and agree on every count).

    python benchmarks/ordering_checker.py [--rows 5000000,20000000] [--keys 10000] [--master local[2]]
                                          [--parquet]

pandas: the history is generated in numpy (not timed), the time is check_pandas.  Spark: the very
same history is generated inside Spark (generate_history_spark: spark.range plus the few fault row
numbers as literals) and checked in one job, so the time is generation + check; with --parquet the
history is written to parquet first (not timed) and the Spark time is reading it and checking.
Prints wall and CPU seconds (this process and its children: the JVM) and the machine's load
average, since the machine may be shared.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spark_throughput import tree_cpu  # noqa: E402  (this directory is on sys.path)
from minibroker.spark.checker import (check_pandas, check_spark, generate_history,  # noqa: E402
                                      generate_history_spark)

FAULTS = dict(losses=37, duplicates=41, swaps=43)


class Timed:
    def __enter__(self) -> "Timed":
        self.t, self.cpu = time.perf_counter(), tree_cpu(os.getpid())
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t
        self.cpu = tree_cpu(os.getpid()) - self.cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="5000000,20000000")
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--parquet", action="store_true", help="Spark reads the history from parquet")
    a = ap.parse_args()
    from minibroker.spark.session import local_session
    spark = local_session(a.master, "minibroker-checker-bench")
    check_spark(*generate_history_spark(spark, 10000, 100, seed=1, **FAULTS))     # warm-up
    with tempfile.TemporaryDirectory() as d:
        for rows in [int(x) for x in a.rows.split(",")]:
            p, dl = generate_history(rows, a.keys, seed=rows, **FAULTS)
            with Timed() as tp:
                rp = check_pandas(p, dl)
            if a.parquet:
                pp, dp = os.path.join(d, f"p{rows}.parquet"), os.path.join(d, f"d{rows}.parquet")
                p.to_parquet(pp)
                dl.to_parquet(dp)
            del p, dl
            with Timed() as ts:
                if a.parquet:
                    rs = check_spark(spark.read.parquet(pp), spark.read.parquet(dp))
                else:
                    rs = check_spark(*generate_history_spark(spark, rows, a.keys, seed=rows, **FAULTS))
            ok = rp.counts() == rs.counts() and (rp.losses, rp.duplicates, rp.violations) == \
                (FAULTS["losses"], FAULTS["duplicates"], FAULTS["swaps"])
            print(f"{rows:>9} rows: pandas {tp.wall:6.1f} s (CPU {tp.cpu:5.1f})  spark {ts.wall:6.1f} s "
                  f"(CPU {ts.cpu:5.1f})  spark/pandas {ts.wall / tp.wall:.2f}  load average "
                  f"{os.getloadavg()[0]:.1f}  {'exact' if ok else 'MISMATCH'}: {rs.summary()}",
                  flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
