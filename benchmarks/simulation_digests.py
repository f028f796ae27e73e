#!/usr/bin/env python3
"""Do seeds replay? Each Simulation(seed) run twice; the digests compared (issue 42).

    python benchmarks/simulation_digests.py [--seeds 500] [--first 0] [--steps 8] [--busy-loops 2]
                                            [--max-seconds 7200]

For seeds first .. first+seeds-1, runs minibroker.testing.Simulation(seed, steps) twice and
counts the seeds whose two digests differ (0 expected: the digest covers only what the seed
decides; timing-dependent outcomes are in `result.observed`). --busy-loops N starts N processes
spinning on a core for the whole run, so the second pass (and the first) run on a loaded
machine; 0 for a quiet one. A violation of an invariant is printed with its seed and counted.
Prints one line per seed that differs, then the totals.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minibroker.testing import Simulation, SimulationViolation  # noqa: E402


def _spin(stop) -> None:
    while not stop.is_set():
        for _ in range(100_000):
            pass


def _digest(seed: int, steps: int) -> str:
    try:
        return Simulation(seed, steps=steps).run().digest
    except SimulationViolation as e:
        print(f"seed {seed}: VIOLATION {e}", flush=True)
        return "violation"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--busy-loops", type=int, default=2)
    ap.add_argument("--max-seconds", type=float, default=7200)
    args = ap.parse_args()
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
                for _ in range(args.busy_loops)]
    for p in spinners:
        p.start()
    started = time.monotonic()
    differ, violations, done = [], 0, 0
    try:
        for seed in range(args.first, args.first + args.seeds):
            if time.monotonic() - started > args.max_seconds:
                print(f"stopped at --max-seconds after {done} seeds")
                break
            first, again = _digest(seed, args.steps), _digest(seed, args.steps)
            violations += (first == "violation") + (again == "violation")
            if first != again:
                differ.append(seed)
                print(f"seed {seed}: {first} then {again}", flush=True)
            done += 1
    finally:
        stop.set()
        for p in spinners:
            p.join(5)
    print(f"{done} seeds x 2 passes, {args.steps} steps, {args.busy_loops} busy loops, "
          f"{time.monotonic() - started:.0f} s: {len(differ)} with differing digests "
          f"{differ[:20]}, {violations} violations")
    return 1 if differ or violations else 0


if __name__ == "__main__":
    sys.exit(main())
