#!/usr/bin/env python3
"""4 GB through the README's cluster (issue 42): is every acknowledged record still there?

    python benchmarks/big_topic.py [--gb 4] [--record-bytes 10240] [--partitions 1]
                                   [--max-seconds 3600]

Starts `minibroker serve` as the README has it (3 brokers, defaults: replication factor 3 by the
auto-created topic's defaults, memory cap and spilling as shipped), with only `--port 0` so that
it does not collide with a running one. confluent-kafka (librdkafka) produces --gb gigabytes to
one topic (acks=all, idempotent, each value starting with its sequence number), then a consumer
reads the topic from the beginning and checks that every sequence number arrives exactly once
and in order per partition. Prints produce and consume MB/s, the broker processes' peak RSS (and
its anonymous part), and the verdict. Bounded by --max-seconds; loopback only.
"""
from __future__ import annotations

import argparse
import os
import signal
import struct
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEQ = struct.Struct(">Q")


def _rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The broker processes' resident memory (RssAnon: without the pages of memory-mapped spill
    files, which the kernel may drop and read again)."""
    total = 0
    for p in [pid] + _children(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(l.split()[1]) for l in f if l.startswith(field + ":"))
        except (OSError, StopIteration):
            pass
    return total / 1024


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def produce(bootstrap: str, topic: str, n: int, size: int, deadline: float) -> tuple[int, float]:
    from confluent_kafka import Producer
    acked, failed = [0], []

    def done(err, msg):
        if err is None:
            acked[0] += 1
        else:
            failed.append(err)
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20})
    pad = b"x" * (size - SEQ.size)
    t0 = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(topic, SEQ.pack(i) + pad, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        if time.monotonic() > deadline:
            raise SystemExit(f"produce: out of time after {i} records")
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(max(1.0, deadline - time.monotonic())):
        raise SystemExit("produce: records still unacknowledged at the deadline")
    if failed:
        raise SystemExit(f"produce: {len(failed)} failed, first {failed[0]}")
    return acked[0], time.monotonic() - t0


def consume(bootstrap: str, topic: str, n: int, deadline: float) -> tuple[dict, float]:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "big-topic-check",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 << 20, "max.partition.fetch.bytes": 10 << 20})
    c.subscribe([topic])
    last: dict[int, int] = {}
    stats = {"records": 0, "out_of_order": 0, "duplicates": 0}
    seen = bytearray(n)
    t0 = None
    while stats["records"] < n and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error():
                raise SystemExit(f"consume: {m.error()}")
            t0 = t0 or time.monotonic()
            (seq,) = SEQ.unpack_from(m.value())
            if seen[seq]:
                stats["duplicates"] += 1
                continue
            seen[seq] = 1
            if seq < last.get(m.partition(), -1):
                stats["out_of_order"] += 1
            last[m.partition()] = seq
            stats["records"] += 1
    c.close()
    stats["missing"] = n - sum(seen)
    return stats, time.monotonic() - (t0 or time.monotonic())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=4.0)
    ap.add_argument("--record-bytes", type=int, default=10240)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--max-seconds", type=float, default=3600)
    args = ap.parse_args()
    n = int(args.gb * (1 << 30)) // args.record_bytes
    deadline = time.monotonic() + args.max_seconds
    serve = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--port", "0"],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             start_new_session=True, env={**os.environ, "PYTHONPATH": REPO})
    peak = [0.0, 0.0]
    stop = threading.Event()

    def watch():
        while not stop.wait(0.5):
            peak[0] = max(peak[0], _rss_mb(serve.pid))
            peak[1] = max(peak[1], _rss_mb(serve.pid, "RssAnon"))
    try:
        line = serve.stdout.readline()
        if not line.startswith("BOOTSTRAP "):
            raise SystemExit(f"serve did not start: {line!r}")
        bootstrap = line.split()[1]
        threading.Thread(target=watch, daemon=True).start()
        subprocess.run([sys.executable, "-m", "minibroker", "topics", "--bootstrap-server", bootstrap,
                        "--create", "--topic", "big", "--partitions", str(args.partitions)],
                       cwd=REPO, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": REPO})
        acked, pt = produce(bootstrap, "big", n, args.record_bytes, deadline)
        mb = acked * args.record_bytes / 1e6
        print(f"produced {acked:,} records ({mb:,.0f} MB) in {pt:.0f} s: {mb / pt:.1f} MB/s, "
              f"broker RSS now {_rss_mb(serve.pid):,.0f} MB", flush=True)
        stats, ct = consume(bootstrap, "big", acked, deadline)
        print(f"consumed {stats['records']:,} in {ct:.0f} s: {stats['records'] * args.record_bytes / 1e6 / max(ct, 1e-9):.1f} MB/s; "
              f"missing {stats['missing']:,}, duplicates {stats['duplicates']:,}, "
              f"out of order {stats['out_of_order']:,}", flush=True)
        print(f"broker processes' peak RSS {peak[0]:,.0f} MB, of it anonymous {peak[1]:,.0f} MB "
              f"(the rest: pages of memory-mapped spill files); "
              f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        ok = stats["missing"] == 0 and stats["duplicates"] == 0 and stats["out_of_order"] == 0
        print("EVERY RECORD, IN ORDER" if ok else "FAILED")
        sys.exit(0 if ok else 1)
    finally:
        stop.set()
        os.killpg(serve.pid, signal.SIGTERM)
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
