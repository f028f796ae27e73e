#!/usr/bin/env python3
"""Broker CPU per request with the protocol trace off, on (to a file) and strict mode on, and
without the hook at all, hot, in process.

    python benchmarks/trace_cost.py [--requests 3000] [--rounds 3]

Each round starts a fresh 1-broker Cluster per mode and sends --requests requests of each kind
one at a time over a memory pipe (after 300 for warm-up): Produce (one 100 B record, acks=1),
Fetch (that partition from offset 0, ~10 records) and Metadata (v1, all topics). Printed: process
CPU microseconds per request, per kind and mode, medians over rounds, and on/off, strict/off and
off/no-hook. "no hook" serves through functools.partial(dispatch, services, context) built here,
which is what dispatch.handler_for returned before the hook; "off" through the broker's own handle (the
hook's one `is not None` branch runs once, when the handle is made; dispatch's own two
`observer is not None` tests per request are in both, being dispatch's).
"""
from __future__ import annotations

import argparse
import asyncio
import functools
import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from kafka.protocol.metadata import MetadataRequest  # noqa: E402
from kafka.protocol.producer import ProduceRequest  # noqa: E402

from minibroker.broker.context import context_class  # noqa: E402
from minibroker.broker.dispatch import dispatch  # noqa: E402
from minibroker.cluster import Cluster  # noqa: E402
from minibroker.log.batch import build_batch  # noqa: E402
from minibroker.network.memory import connect  # noqa: E402

MODES = ("no hook", "off", "on", "strict")


def _produce() -> bytes:
    records = bytes(build_batch([(None, b"x" * 100, [])], timestamp=1))
    part = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=records)
    return ProduceRequest(transactional_id=None, acks=1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[part])]).encode(version=9)


def _fetch() -> tuple[int, bytes]:
    from kafka.protocol.consumer import FetchRequest
    T = FetchRequest.FetchTopic
    req = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
                       isolation_level=0, session_id=0, session_epoch=-1,
                       forgotten_topics_data=[], rack_id="", topics=[T(topic="t", partitions=[
                           T.FetchPartition(partition=0, current_leader_epoch=-1,
                                            fetch_offset=0, last_fetched_epoch=-1,
                                            log_start_offset=-1, partition_max_bytes=1500)])])
    return 11, req.encode(version=11)


KINDS = {"Produce": (0, 9, _produce(), True), "Fetch": (1, *_fetch(), False),
         "Metadata": (3, 1, MetadataRequest(topics=None).encode(version=1), False)}


async def cost(mode: str, n: int) -> dict[str, float]:
    path = None
    kw = {}
    if mode == "on":
        fd, path = tempfile.mkstemp(suffix=".jsonl")
        os.close(fd)
        kw["trace"] = path
    elif mode == "strict":
        kw["strict"] = True
    cluster = Cluster(brokers=1, **kw)
    await cluster.start()
    try:
        await cluster.create_topic("t", 1, 1)
        broker = cluster.brokers[1]
        services = broker.services
        handle = (functools.partial(dispatch, services, context_class(services))
                  if mode == "no hook" else broker.handle)
        conn = connect(handle)
        out = {}
        for kind, (key, version, body, flexible) in KINDS.items():
            if kind == "Fetch":             # ~10 records to read back
                for _ in range(10):
                    await conn.send_encoded(*KINDS["Produce"][:3], flexible=True)
            for _ in range(300):
                await conn.send_encoded(key, version, body, flexible=flexible)
            cpu = time.process_time()
            for _ in range(n):
                await conn.send_encoded(key, version, body, flexible=flexible)
            out[kind] = (time.process_time() - cpu) / n * 1e6
        conn.close("done")
        return out
    finally:
        await cluster.stop()
        if path:
            os.unlink(path)


async def main(a: argparse.Namespace) -> None:
    runs = {m: {k: [] for k in KINDS} for m in MODES}
    for r in range(a.rounds):
        for mode in (MODES if r % 2 == 0 else MODES[::-1]):
            for kind, us in (await cost(mode, a.requests)).items():
                runs[mode][kind].append(us)
        print(f"round {r + 1}: " + "; ".join(
            f"{m}: " + ", ".join(f"{k} {runs[m][k][-1]:.1f}" for k in KINDS) for m in MODES),
            flush=True)
    med = {m: {k: statistics.median(v) for k, v in ks.items()} for m, ks in runs.items()}
    print("median broker CPU us per request:")
    for kind in KINDS:
        nh, off, on, st = (med[m][kind] for m in MODES)
        print(f"  {kind:9s} no hook {nh:6.1f}  off {off:6.1f}  on {on:6.1f}  strict {st:6.1f}"
              f"   on/off {on / off:.2f}  strict/off {st / off:.2f}  off/no hook {off / nh:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    (uvloop.run if uvloop is not None else asyncio.run)(main(args))
