#!/usr/bin/env python3
"""What latency.py (and load.py's latency scenario, the same loop) reports for a broker that takes a
known time to answer: a one-broker serve whose every Produce answer is held by a busy wait of
--delays milliseconds, measured by latency.py against it.

    python benchmarks/latency_floor.py [--delays 0,0.3,0.6,0.9,1.2] [--duration 8]

The client's pacing loop polls with a whole-millisecond timeout, so in the last millisecond before
each send it polls without blocking, on the CPU its librdkafka threads share; an answer arriving
then is reported when that spin ends, at the next send (2 ms apart at 500 msgs/s). An answer slower
than about a millisecond therefore shows as ~2 ms in p90/p99, whatever its own time. See
docs/performance.md (RF 3's p99).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The broker: minibroker serve, its Produce handler wrapped to busy-wait DELAY_S before answering.
BROKER = r'''
import dataclasses, os, sys, time
import minibroker.broker.handlers  # noqa: F401 (registers the handlers)
import minibroker.broker.dispatch as dispatch
from minibroker.cli import main
DELAY_S = float(os.environ["MB_FLOOR_DELAY_MS"]) / 1000
produce = dispatch.HANDLERS[0]
async def delayed(ctx, body):
    out = await produce.fn(ctx, body)
    end = time.perf_counter() + DELAY_S
    while time.perf_counter() < end:
        pass
    return out
dispatch.HANDLERS[0] = dataclasses.replace(produce, fn=delayed)
main(["serve", "--port", "0", "--brokers", "1"])
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delays", default="0,0.3,0.6,0.9,1.2")
    ap.add_argument("--duration", type=float, default=8)
    a = ap.parse_args()
    for delay in a.delays.split(","):
        env = {**os.environ, "MB_FLOOR_DELAY_MS": delay, "PYTHONPATH": REPO}
        proc = subprocess.Popen(["taskset", "-c", "1", sys.executable, "-c", BROKER], cwd=REPO,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        try:
            bootstrap = proc.stdout.readline().decode().split()[1]
            out = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "latency.py"),
                                  "--bootstrap", bootstrap, "--duration", str(a.duration)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
            line = [x for x in out.splitlines() if x.startswith("brokers=")]
            print(f"answer held {float(delay):.1f} ms: {line[-1] if line else out.strip()}", flush=True)
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
