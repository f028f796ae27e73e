#!/usr/bin/env python3
"""The reference client (minibroker.client) against aiokafka and kafka-python, in one run.

    python benchmarks/reference_client.py [--records 1000000] [--size 100] [--limit 120] [--only ref,aiokafka,kafka-python]

Starts the README's cluster (`python -m minibroker serve --port 0`: 3 brokers, defaults), then for
each client in turn: creates a topic of its own with the same settings (3 partitions, RF 1),
produces --records records of --size bytes (acks=1, each client's defaults otherwise: batch 16 KiB,
linger 5 ms for the reference client, 0 for the others as their defaults say), then consumes them
all from the beginning with a fresh consumer (no group, manual assignment). Each phase stops at
--limit seconds (the rate is then over what was done, and says so). Prints records/s per client
and phase, the client's CPU per record (this process's CPU time: on a shared machine the steadier
figure), and each client's ratios to the reference client. Clients run in this process, one at a
time; the broker is a separate process. Uses only what the project's test extra installs.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTITIONS = 3


def chunks(n: int, limit: float, size: int = 10000):
    """Chunk sizes adding up to `n`, each asked for once the previous one is done; none once
    `limit` seconds have passed (the caller counts what it sent)."""
    deadline = time.monotonic() + limit
    done = 0
    while done < n and time.monotonic() < deadline:
        chunk = min(size, n - done)
        yield chunk
        done += chunk


async def ref_produce(bs: str, topic: str, n: int, value: bytes, limit: float) -> int:
    from minibroker.client import Producer
    p = Producer(bs, acks=1, enable_idempotence=False, linger_ms=5)
    await p.start()
    done = 0
    try:
        for chunk in chunks(n, limit):
            futs = [p.send(topic, value) for _ in range(chunk)]
            await asyncio.gather(*futs)
            done += chunk
    finally:
        await p.stop()
    return done


async def ref_consume(bs: str, topic: str, n: int, limit: float) -> int:
    from minibroker.client import Consumer, TopicPartition
    c = Consumer(bs, auto_offset_reset="earliest", max_poll_records=10000, ordering_barrier=False)
    c.assign([TopicPartition(topic, i) for i in range(PARTITIONS)])
    deadline = time.monotonic() + limit
    got = 0
    try:
        while got < n and time.monotonic() < deadline:
            got += len(await c.poll(1.0))
    finally:
        await c.close()
    return got


async def aio_produce(bs: str, topic: str, n: int, value: bytes, limit: float) -> int:
    from aiokafka import AIOKafkaProducer
    p = AIOKafkaProducer(bootstrap_servers=bs, acks=1, linger_ms=5)
    await p.start()
    done = 0
    try:
        for chunk in chunks(n, limit):
            futs = [await p.send(topic, value) for _ in range(chunk)]
            await asyncio.gather(*futs)
            done += chunk
    finally:
        await p.stop()
    return done


async def aio_consume(bs: str, topic: str, n: int, limit: float) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    c = AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    c.assign([TopicPartition(topic, i) for i in range(PARTITIONS)])
    deadline = time.monotonic() + limit
    got = 0
    try:
        while got < n and time.monotonic() < deadline:
            batches = await c.getmany(timeout_ms=1000, max_records=10000)
            got += sum(len(v) for v in batches.values())
    finally:
        await c.stop()
    return got


def kp_produce(bs: str, topic: str, n: int, value: bytes, limit: float) -> int:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bs, acks=1, linger_ms=5)
    done = 0
    try:
        for chunk in chunks(n, limit):
            for _ in range(chunk):
                p.send(topic, value)
            p.flush(limit)
            done += chunk
    finally:
        p.close(10)
    return done


def kp_consume(bs: str, topic: str, n: int, limit: float) -> int:
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest", enable_auto_commit=False,
                      max_poll_records=10000)
    c.assign([TopicPartition(topic, i) for i in range(PARTITIONS)])
    deadline = time.monotonic() + limit
    got = 0
    try:
        while got < n and time.monotonic() < deadline:
            got += sum(len(v) for v in c.poll(1000).values())
    finally:
        c.close()
    return got


CLIENTS = {
    "ref": (ref_produce, ref_consume),
    "aiokafka": (aio_produce, aio_consume),
    "kafka-python": (kp_produce, kp_consume),
}


def create_topic(bs: str, topic: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()


def timed(fn, *args) -> tuple[int, float, float]:
    """What fn did, in wall seconds and in this process's CPU seconds (all its threads: the
    client's own work; on a shared machine the CPU figure moves far less than the wall one)."""
    t0, c0 = time.perf_counter(), time.process_time()
    r = fn(*args)
    if asyncio.iscoroutine(r):
        r = asyncio.run(r)
    return r, time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--limit", type=float, default=120, help="seconds per client and phase, at most")
    ap.add_argument("--only", default="ref,aiokafka,kafka-python")
    a = ap.parse_args()
    proc = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": REPO})
    bs = proc.stdout.readline().decode().split()[1]
    value = b"v" * a.size
    rates: dict[tuple[str, str], float] = {}
    cpu: dict[tuple[str, str], float] = {}          # client CPU microseconds per record
    try:
        for name in a.only.split(","):
            produce, consume = CLIENTS[name]
            topic = f"bench-{name}"
            create_topic(bs, topic)
            n, s, c = timed(produce, bs, topic, a.records, value, a.limit)
            rates[(name, "produce")], cpu[(name, "produce")] = n / s, c / max(n, 1) * 1e6
            print(f"{name:13} produce {n:>9,} records in {s:6.1f} s: {n / s:>9,.0f} records/s, "
                  f"client CPU {cpu[(name, 'produce')]:5.1f} us/record"
                  + ("" if n == a.records else "  (stopped at --limit)"), flush=True)
            m, s, c = timed(consume, bs, topic, n, a.limit)
            rates[(name, "consume")], cpu[(name, "consume")] = m / s, c / max(m, 1) * 1e6
            print(f"{name:13} consume {m:>9,} records in {s:6.1f} s: {m / s:>9,.0f} records/s, "
                  f"client CPU {cpu[(name, 'consume')]:5.1f} us/record"
                  + ("" if m >= n else "  (stopped at --limit)"), flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    if ("ref", "produce") in rates:
        print("reference client / other, records/s and (in brackets) the other's client CPU per "
              "record over the reference client's (> 1: the reference client is faster):")
        for name in a.only.split(","):
            if name != "ref" and (name, "produce") in rates:
                print(f"  vs {name:13} produce {rates[('ref', 'produce')] / rates[(name, 'produce')]:.2f}"
                      f" ({cpu[(name, 'produce')] / cpu[('ref', 'produce')]:.2f})"
                      f"  consume {rates[('ref', 'consume')] / rates[(name, 'consume')]:.2f}"
                      f" ({cpu[(name, 'consume')] / cpu[('ref', 'consume')]:.2f})")


if __name__ == "__main__":
    main()
