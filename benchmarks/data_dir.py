#!/usr/bin/env python3
"""Produce and consume with `serve --data-dir` beside the in-memory default, in one run.

    python benchmarks/data_dir.py [--rounds 2] [--duration 5] [--brokers 1] [--max-bytes 3e9]

Each round starts a fresh `python -m minibroker serve --brokers N --port 0` twice, once in memory
and once with `--data-dir` (a new temporary directory, on the filesystem /tmp is on), in
alternating order, and runs ../shared/perf/load.py --mode throughput against it (the shared
perf tools: confluent-kafka producers and consumers, 100 B and 10 KiB, acks=1 and all; run
`bash ../shared/perf/setup.sh` first if $PERF_DIR, default /tmp/minibroker-perf, has no venv).
Prints each scenario's median over the rounds for both and the ratio disk/memory (> 1: the disk
variant is faster). Every load.py run is bounded by --duration per scenario and --max-bytes per
produce scenario; the machine is shared, so read the ratios, not the absolute figures.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOAD = os.path.join(os.path.dirname(REPO), "shared", "perf", "load.py")
PERF_DIR = os.environ.get("PERF_DIR", "/tmp/minibroker-perf")
ROWS = [("produce_100B_acks1", "msgs_per_s"), ("produce_100B_acksall", "msgs_per_s"),
        ("produce_10KiB_acks1", "MB_per_s"), ("produce_10KiB_acksall", "MB_per_s"),
        ("consume_100B", "msgs_per_s"), ("consume_10KiB", "MB_per_s")]


def one_run(args, data_dir: str | None) -> dict:
    cmd = [sys.executable, "-m", "minibroker", "serve", "--brokers", str(args.brokers),
           "--port", "0", "--override", f"default.replication.factor={args.brokers}"]
    if data_dir is not None:
        cmd += ["--data-dir", data_dir]
    broker = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, start_new_session=True,
                              env={**os.environ, "PYTHONPATH": REPO})
    try:
        line = broker.stdout.readline()
        if not line.startswith("BOOTSTRAP "):
            raise RuntimeError(f"serve did not start: {line!r}")
        out = subprocess.run(
            [os.path.join(PERF_DIR, "venv", "bin", "python"), LOAD, line.split()[1],
             "--mode", "throughput", "--duration", str(args.duration), "--max-bytes",
             str(args.max_bytes), "--broker-pid", str(broker.pid), "--quiet"],
            capture_output=True, text=True, timeout=60 + 12 * (3 * args.duration + 30))
        return json.loads(out.stdout.strip().splitlines()[-1])["throughput"]
    finally:
        os.killpg(broker.pid, signal.SIGTERM)
        broker.wait(30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--brokers", type=int, default=1)
    ap.add_argument("--max-bytes", type=float, default=3e9)
    args = ap.parse_args()
    results: dict[str, list[dict]] = {"memory": [], "disk": []}
    for r in range(args.rounds):
        order = ("memory", "disk") if r % 2 == 0 else ("disk", "memory")
        for variant in order:
            tmp = tempfile.mkdtemp(prefix="mb-data-") if variant == "disk" else None
            try:
                results[variant].append(one_run(args, tmp))
            finally:
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
            print(f"# round {r + 1} {variant} done", file=sys.stderr, flush=True)
    print(f"{args.brokers} broker(s), {args.rounds} rounds x {args.duration:g} s per scenario; "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'scenario':24} {'metric':11} {'memory':>11} {'--data-dir':>11} {'disk/mem':>9}")
    for scenario, metric in ROWS:
        med = {}
        for variant, runs in results.items():
            vals = [run[scenario][metric] for run in runs if metric in run.get(scenario, {})]
            med[variant] = statistics.median(vals) if vals else None
        ratio = (f"{med['disk'] / med['memory']:.2f}" if med["disk"] and med["memory"] else "-")
        print(f"{scenario:24} {metric:11} {med['memory'] or 0:11.1f} {med['disk'] or 0:11.1f} "
              f"{ratio:>9}")


if __name__ == "__main__":
    main()
