#!/usr/bin/env python3
"""Metadata-log snapshots under topic churn (issue 42): is every voter's log bounded, and how long
does a restart take to load?

    python benchmarks/metadata_snapshots.py [--cycles 100000] [--brokers 3]
                                            [--interval-bytes 20971520] [--data-dir DIR]

Creates and deletes a topic --cycles times on an in-process cluster with --data-dir (a temporary
directory by default), with metadata.log.max.record.bytes.between.snapshots at --interval-bytes
(Kafka's default 20 MiB). Prints, per voter, the records written in all, the snapshots taken and
the most bytes its copy held after the last snapshot (bounded by the interval plus one commit),
the metadata directory's size on disk, then the time a restarted cluster takes from Cluster() to
a running controller (it loads each voter's snapshot and the records after it; the issue asks for
under 2 s).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minibroker.cluster import Cluster  # noqa: E402


def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


async def main(args) -> None:
    config = dict(brokers=args.brokers, data_dir=args.data_dir, offsets_topic_num_partitions=1,
                  metadata_log_max_record_bytes_between_snapshots=args.interval_bytes)
    async with Cluster(**config) as c:
        peak = {v: 0 for v in c.quorum.copies}
        started = time.monotonic()
        for i in range(args.cycles):
            await c.create_topic(f"churn-{i}", 1, min(3, args.brokers))
            await c.channel.delete_topics([f"churn-{i}"])
            for v, copy in c.quorum.copies.items():
                peak[v] = max(peak[v], copy.bytes_since_snapshot)
            if i and i % 10000 == 0:
                print(f"{i} cycles, {time.monotonic() - started:.0f} s", flush=True)
        churn_s = time.monotonic() - started
        for v, copy in sorted(c.quorum.copies.items()):
            meta = os.path.join(args.data_dir, f"broker-{v}", "__cluster_metadata-0")
            print(f"voter {v}: {len(copy):,} records written, {copy.snapshots} snapshots, "
                  f"{copy.record_count} records held now, at most {peak[v]:,} bytes after a "
                  f"snapshot (interval {args.interval_bytes:,}); {_dir_bytes(meta):,} bytes on disk")
    t0 = time.monotonic()
    c = Cluster(**config)
    await c.start()
    load_s = time.monotonic() - t0
    print(f"{args.cycles:,} create+delete cycles in {churn_s:.0f} s; restart to a running "
          f"controller {load_s:.2f} s")
    await c.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=100_000)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--interval-bytes", type=int, default=20_971_520)
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="metadata-snapshots-") as tmp:
        a.data_dir = a.data_dir or tmp
        asyncio.run(main(a))
