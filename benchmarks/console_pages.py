#!/usr/bin/env python3
"""How long each console page takes to answer with 1,000 topics and 100 consumer groups.

    python benchmarks/console_pages.py [--topics 1000] [--groups 100] [--repeat 10]

A 3-broker cluster (`python -m minibroker serve`, its own process) gets `--topics` topics of 3
partitions, records in the first topic, and `--groups` groups with committed offsets on 10 topics
each (committed from outside, so the groups are Empty); the console (ThreadedConsole) then serves
every page `--repeat` times to one HTTP client. Printed: per page the first (cold) answer and
the median and max of the rest, in ms, against the goal of 500 ms. Nothing is asserted: the
machine is shared, so read the figures with its load in mind.
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

import httpx

from minibroker.client.admin import Admin, NewTopic
from minibroker.client.producer import Producer
from minibroker.client.records import TopicPartition
from minibroker.console.server import ThreadedConsole

GOAL_MS = 500
PAGES = ["/cluster", "/topics", "/topics/t0000", "/topics/t0000/messages?partition=0",
         "/messages", "/groups", "/groups/g000", "/changes", "/changes/t0000", "/transactions"]


async def populate(bootstrap: str, topics: int, groups: int) -> None:
    async with Admin(bootstrap, request_timeout_ms=120000) as admin:
        names = [f"t{i:04d}" for i in range(topics)]
        for i in range(0, topics, 100):
            await admin.create_topics([NewTopic(n, 3, 1) for n in names[i:i + 100]])
        await admin.metadata.refresh(names[:1])
        async with Producer(bootstrap) as p:
            await asyncio.gather(*[p.send("t0000", b"v" * 100, key=b"k%d" % i, partition=i % 3)
                                   for i in range(30)])
        for g in range(groups):
            await admin.alter_group_offsets(f"g{g:03d}", {
                TopicPartition(names[(g + k) % topics], 0): 0 for k in range(10)})


def measure(url: str, repeat: int) -> list[tuple[str, float, float, float]]:
    rows = []
    with httpx.Client(timeout=60) as http:
        for page in PAGES:
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                r = http.get(url + page)
                times.append((time.perf_counter() - t0) * 1000)
                if r.status_code != 200:
                    raise SystemExit(f"{page}: HTTP {r.status_code}")
            rest = times[1:] or times
            rows.append((page, times[0], statistics.median(rest), max(rest)))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    serve = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "3",
                              "--port", "0"], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    try:
        bootstrap = serve.stdout.readline().split()[1]          # BOOTSTRAP host:port,...
        t0 = time.perf_counter()
        asyncio.run(populate(bootstrap, args.topics, args.groups))
        print(f"{args.topics} topics x 3 partitions and {args.groups} groups in "
              f"{time.perf_counter() - t0:.1f} s")
        with ThreadedConsole(bootstrap) as console:
            rows = measure(console.url, args.repeat)
    finally:
        os.killpg(serve.pid, signal.SIGTERM)
        serve.wait(30)
    print(f"{'page':<40} {'first ms':>9} {'median ms':>10} {'max ms':>8}  goal {GOAL_MS} ms")
    for page, first, median, worst in rows:
        verdict = "ok" if median < GOAL_MS else "SLOW"
        print(f"{page:<40} {first:9.0f} {median:10.0f} {worst:8.0f}  {verdict}")


if __name__ == "__main__":
    main()
