#!/usr/bin/env python3
"""Seeded simulations, many and long: seeds, counts and violations (0 unless a bug is found).

    python benchmarks/simulations.py [--seeds 1000] [--first 0] [--steps 8] [--max-seconds 3600]

Runs minibroker.testing.Simulation(seed, steps) for seeds first .. first+seeds-1 (each a fresh
3-broker cluster on virtual time: broker kills and restarts, controller failovers, network
partitions, KIP-253 expansions/deletions, acks=all production, a churning consumer group),
prints one line per seed and the totals. The first violation stops the run and prints its seed
and step; replay it with `Simulation(seed, steps).run()`. tests/test_simulation.py runs 100 seeds
with shorter plans in CI.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minibroker.testing import Simulation, SimulationViolation  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1000)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--max-seconds", type=float, default=3600,
                    help="stop starting new seeds after this many real seconds")
    args = ap.parse_args()
    totals: collections.Counter = collections.Counter()
    start = time.monotonic()
    violation = None
    for seed in range(args.first, args.first + args.seeds):
        if time.monotonic() - start > args.max_seconds:
            print(f"stopped after {args.max_seconds:.0f} s")
            break
        try:
            r = Simulation(seed, steps=args.steps).run()
        except SimulationViolation as e:
            violation = e
            print(f"VIOLATION: {e}", flush=True)
            break
        print(r.summary(), flush=True)
        totals.update(r.counts)
        for name in ("acked", "failed", "delivered"):
            totals[name] += getattr(r, name)
        totals["virtual_seconds"] += r.virtual_seconds
        totals["runs"] += 1
    real = time.monotonic() - start
    print(f"\n{totals['runs']} seeds from {args.first}, {args.steps} steps each: "
          f"acked={totals['acked']} failed={totals['failed']} delivered={totals['delivered']} "
          f"kills={totals['kill']} failovers={totals['controller_failover']} "
          f"partitions={totals['partition']} expansions={totals['expand']} "
          f"deletions={totals['shrink']} joins={totals['join']} leaves={totals['leave']} "
          f"violations={1 if violation else 0}")
    print(f"{totals['virtual_seconds']:.0f} virtual s in {real:.0f} real s "
          f"(virtual/real ratio {totals['virtual_seconds'] / max(real, 1e-9):.1f})")
    return 1 if violation else 0


if __name__ == "__main__":
    sys.exit(main())
