#!/usr/bin/env python3
"""The per-key ordering checker (minibroker.spark.checker) at 5M and 20M rows: pandas and Spark
back-ends on the same generated history with injected losses, duplicates and swaps; both must
report exactly the injected counts.

    python benchmarks/ordering_checker.py [--rows 5000000,20000000] [--keys 10000] [--master local[2]]

The history is written to parquet first (not timed); the Spark time is reading that parquet and
running the check job, the pandas time reading it and checking.  The machine may be shared.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minibroker.spark.checker import check_pandas, check_spark, generate_history  # noqa: E402

FAULTS = dict(losses=37, duplicates=41, swaps=43)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="5000000,20000000")
    ap.add_argument("--keys", type=int, default=10000)
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args()
    import pandas as pd

    from minibroker.spark.session import local_session
    spark = local_session(a.master, "minibroker-checker-bench")
    with tempfile.TemporaryDirectory() as d:
        for rows in [int(x) for x in a.rows.split(",")]:
            p, dl = generate_history(rows, a.keys, seed=rows, **FAULTS)
            pp, dp = os.path.join(d, f"p{rows}.parquet"), os.path.join(d, f"d{rows}.parquet")
            p.to_parquet(pp)
            dl.to_parquet(dp)
            del p, dl
            t = time.perf_counter()
            rp = check_pandas(pd.read_parquet(pp), pd.read_parquet(dp))
            tp = time.perf_counter() - t
            t = time.perf_counter()
            rs = check_spark(spark.read.parquet(pp), spark.read.parquet(dp))
            ts = time.perf_counter() - t
            ok = rp.counts() == rs.counts() and (rp.losses, rp.duplicates, rp.violations) == \
                (FAULTS["losses"], FAULTS["duplicates"], FAULTS["swaps"])
            print(f"{rows:>9} rows: pandas {tp:6.1f} s  spark {ts:6.1f} s  (spark/pandas {ts / tp:.2f})  "
                  f"{'exact' if ok else 'MISMATCH'}: {rs.summary()}")
    spark.stop()


if __name__ == "__main__":
    main()
