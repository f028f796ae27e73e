#!/usr/bin/env python3
"""The broker CPU one acks=all single-record write costs at RF 3 against RF 1, hot, in process.

    python benchmarks/rf3_cost.py [--writes 3000] [--rounds 3] [--idle-topics 5] [--profile]

Each round starts a fresh 3-broker Cluster on uvloop (its brokers linked by memory pipes, as in
`minibroker serve`) with a 1-partition topic at RF 1, then another at RF 3 (min.insync.replicas
2), each beside --idle-topics topics of 4 partitions at the same RF (run.py's RF 3 cluster holds
five), and sends --writes ProduceRequests of one 100 B record one at a time from a client on a
memory pipe to the leader, after 500 for warm-up. Printed: process CPU microseconds per write, per
round and the median, and RF 3 / RF 1. No socket, no idle time between writes: the broker's own
work, warm. latency.py's round trip adds the client and the kernel (~0.15 ms on this VM) to both.

--profile: one more RF 3 pass under cProfile, its time split by where it is spent: the
inter-broker protocol (framing, encoding, decoding, dispatch, pipes), the logs, the replica manager
and partitions, the follower's fetcher, and the rest (handlers, asyncio). cProfile's overhead
inflates small functions, so read the split as shares, not as microseconds.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import os
import pstats
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from kafka.protocol.producer import ProduceRequest  # noqa: E402

from minibroker.cluster import Cluster  # noqa: E402
from minibroker.config import ClusterConfig  # noqa: E402
from minibroker.log.batch import build_batch  # noqa: E402
from minibroker.network.memory import connect  # noqa: E402

PRODUCE_VERSION = 9
# Where a function's file puts it in --profile's split (the first prefix that matches).
AREAS = [
    ("inter-broker protocol", ("minibroker/protocol/", "minibroker/network/",
                               "minibroker/broker/dispatch.py", "<codegen")),
    ("logs", ("minibroker/log/",)),
    ("replica manager, partitions, sessions", ("minibroker/broker/replica_manager.py",
                                               "minibroker/broker/replica_state.py",
                                               "minibroker/broker/append_path.py",
                                               "minibroker/broker/fetch_path.py",
                                               "minibroker/broker/partition_reads.py",
                                               "minibroker/broker/isr.py",
                                               "minibroker/broker/partition.py",
                                               "minibroker/broker/fetch_session.py",
                                               "minibroker/broker/first_fetch.py")),
    ("follower fetcher", ("minibroker/broker/fetcher.py",)),
]


def _request_body() -> bytes:
    records = bytes(build_batch([(None, b"x" * 100, [])], timestamp=1))
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)
    return ProduceRequest(transactional_id=None, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[part])]).encode(
            version=PRODUCE_VERSION)


async def cost(rf: int, writes: int, idle_topics: int, profile: cProfile.Profile | None) -> float:
    """CPU microseconds per acks=all write on a fresh cluster at `rf`."""
    cluster = Cluster(ClusterConfig(brokers=3))
    await cluster.start()
    try:
        await cluster.create_topic("t", 1, rf, {"min.insync.replicas": str(min(rf, 2))})
        for i in range(idle_topics):
            await cluster.create_topic(f"idle-{i}", 4, rf)
        leader_id = cluster.brokers[1].metadata.topics["t"].partitions[0].leader
        conn = connect(cluster.brokers[leader_id].handle)
        body = _request_body()

        async def write() -> None:
            await conn.send_encoded(0, PRODUCE_VERSION, body, flexible=True)
        for _ in range(500):
            await write()
        await asyncio.sleep(0.2)        # the followers' first fetches and ISR settle
        if profile is not None:
            profile.enable()
        cpu = time.process_time()
        for _ in range(writes):
            await write()
        cpu = time.process_time() - cpu
        if profile is not None:
            profile.disable()
        conn.close("done")
        return cpu / writes * 1e6
    finally:
        await cluster.stop()


def split(profile: cProfile.Profile) -> list[tuple[str, float]]:
    by_area: dict[str, float] = collections.defaultdict(float)
    for (path, _, _), (_, _, tottime, _, _) in pstats.Stats(profile).stats.items():
        rel = path.replace(REPO + os.sep, "")
        area = next((name for name, prefixes in AREAS if rel.startswith(prefixes)), "the rest")
        by_area[area] += tottime
    total = sum(by_area.values())
    return sorted(((a, t / total) for a, t in by_area.items()), key=lambda kv: -kv[1])


async def main(a: argparse.Namespace) -> None:
    runs: dict[int, list[float]] = {1: [], 3: []}
    for r in range(a.rounds):
        for rf in (1, 3):
            runs[rf].append(await cost(rf, a.writes, a.idle_topics, None))
        print(f"round {r + 1}: RF 1 {runs[1][-1]:.1f} us, RF 3 {runs[3][-1]:.1f} us per write",
              flush=True)
    rf1, rf3 = statistics.median(runs[1]), statistics.median(runs[3])
    print(f"median: RF 1 {rf1:.1f} us, RF 3 {rf3:.1f} us of broker CPU per acks=all write; "
          f"RF 3 / RF 1 {rf3 / rf1:.2f}; RF 3 - RF 1 {rf3 - rf1:.1f} us")
    if a.profile:
        prof = cProfile.Profile()
        await cost(3, a.writes, a.idle_topics, prof)
        print("RF 3 under cProfile, share of its time:")
        for area, share in split(prof):
            print(f"  {share * 100:5.1f}%  {area}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writes", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle-topics", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    (uvloop.run if uvloop is not None else asyncio.run)(main(args))
