#!/usr/bin/env python3
"""The 0.9 client-rewrite claim: a pipelined, batching producer against one request in flight.

    python benchmarks/pipelining.py [--records 20000] [--size 100] [--partitions 6] [--limit 60]

Starts `python -m minibroker serve --brokers 3 --port 0` as a subprocess, creates a topic (RF 3,
acks=all so every request waits for replication, the latency the proposal wants to hide), then in
the same run, alternating, each mode `--repeat` times on a fresh topic:
- pipelined: max_in_flight=5, linger_ms=5, batch_size=16384;
- one in flight: max_in_flight=1 per broker connection, linger_ms=0 (the 0.8 producer's shape).
Both idempotent, same records.  Prints records/s of each (median) and the ratio pipelined/one.
Bounded: `--records` per run, and a run is abandoned after `--limit` seconds.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import time

from minibroker.client import Admin, NewTopic, Producer


async def one_run(bs: str, topic: str, n: int, size: int, limit: float, **cfg) -> float:
    async with Producer(bs, acks="all", enable_idempotence=True, **cfg) as producer:
        value = b"x" * size
        await asyncio.wait_for(producer.send(topic, value), limit)       # warm: metadata, conns
        t0 = time.perf_counter()
        futs = [producer.send(topic, value, key=b"%d" % (i % 1000)) for i in range(n)]
        await asyncio.wait_for(asyncio.gather(*futs), limit)
        return n / (time.perf_counter() - t0)


async def main_async(args, bs: str) -> None:
    modes = {
        "pipelined (max_in_flight=5, linger 5 ms)": dict(max_in_flight=5, linger_ms=5,
                                                         batch_size=16384),
        "one in flight (max_in_flight=1, linger 0)": dict(max_in_flight=1, linger_ms=0,
                                                          batch_size=16384),
    }
    rates: dict[str, list[float]] = {m: [] for m in modes}
    async with Admin(bs) as admin:
        for r in range(args.repeat):
            for i, (name, cfg) in enumerate(modes.items()):
                topic = f"pipelining-{r}-{i}"
                await admin.create_topics([NewTopic(topic, args.partitions, 3)])
                await admin.describe_topics([topic])
                rates[name].append(await one_run(bs, topic, args.records, args.size, args.limit,
                                                 **cfg))
    med = {m: statistics.median(v) for m, v in rates.items()}
    names = list(modes)
    lines = [f"records={args.records} x {args.size} B, {args.partitions} partitions RF 3, acks=all, "
             f"3 brokers, median of {args.repeat}"]
    for m in names:
        lines.append(f"  {m:45s} {med[m]:10.0f} records/s  (runs: "
                     f"{', '.join(f'{x:.0f}' for x in rates[m])})")
    lines.append(f"  ratio pipelined / one in flight: {med[names[0]] / med[names[1]]:.2f}x")
    print("\n".join(lines))
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "pipelining.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limit", type=float, default=60.0)
    args = ap.parse_args()
    proc = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "3",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        line = proc.stdout.readline().decode().strip()
        if not line.startswith("BOOTSTRAP "):
            raise SystemExit(f"broker did not start: {line!r}")
        asyncio.run(main_async(args, line.split(None, 1)[1]))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
