#!/usr/bin/env python3
"""What this machine charges to fault in fresh memory, the floor under a broker that keeps what it
is sent: CPU seconds per GB to touch every 4 KiB page of a new anonymous mapping, then of the same
mapping again (already faulted: the loop's own cost), and with MADV_HUGEPAGE asked for.

    python benchmarks/fresh_memory.py [--mib 1024] [--rounds 3]

A broker that keeps every produced batch (minibroker below log.memory.max.bytes, Kafka's page cache)
pays this once per byte kept; librdkafka's mock keeps ~5 MB per partition and reuses it, so its CPU
per GB never includes it (docs/performance.md). Pinned to CPU 1 like the brokers in run.py.
"""
from __future__ import annotations

import argparse
import mmap
import os
import time


def touch(m: mmap.mmap, size: int, value: int) -> float:
    t0 = time.process_time()
    for i in range(0, size, 4096):
        m[i] = value
    return time.process_time() - t0


def hugepages_kib() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return -1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    if hasattr(os, "sched_setaffinity") and os.cpu_count() and os.cpu_count() > 1:
        os.sched_setaffinity(0, {1})
    size = a.mib << 20
    gb = size / 1e9
    for r in range(a.rounds):
        m = mmap.mmap(-1, size)
        first = touch(m, size, 1)
        again = touch(m, size, 2)
        m.close()
        h = mmap.mmap(-1, size)
        advised = hasattr(mmap, "MADV_HUGEPAGE")
        if advised:
            h.madvise(mmap.MADV_HUGEPAGE)
        huge = touch(h, size, 1)
        granted = hugepages_kib()
        h.close()
        print(f"round {r + 1}: fresh 4 KiB pages {(first - again) / gb:.3f} s/GB (loop alone "
              f"{again / gb:.3f}), MADV_HUGEPAGE {'asked' if advised else 'unavailable'}: "
              f"{(huge - again) / gb:.3f} s/GB, AnonHugePages while mapped {granted} KiB")


if __name__ == "__main__":
    main()
