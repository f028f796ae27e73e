#!/usr/bin/env python3
"""Where an acks=all write's time goes on a served RF 3 cluster: the median gap before each hop.

    python benchmarks/rf3_hops.py [--idle-topics 5] [--duration 4] [--warm-cpu]

Runs `minibroker serve` (3 brokers in one process, min.insync.replicas 2, pinned to CPU 1) with a
perf_counter stamp at each hop of a write: the produce read and appended, each follower's Fetch
answered and written to its pipe, each follower's response read and next request built, each
request read by the leader, the HW move, the produce answered and written. latency.py drives it
(one 100 B record at a time, --bootstrap); the broker writes its stamps when it stops. Printed: the
most common hop sequence and the median microseconds before each hop, over the last two thirds
of the writes. A stamp costs about a microsecond, so compare runs of this script, not its sum with
latency.py's. --warm-cpu is latency.py's (no wake-up from idle). Wraps internals by name
(broker/dispatch.py's HANDLERS, fetcher and connection methods): a rename fails it loudly.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def serve_stamped(out: str) -> None:
    """`minibroker serve` with the hop stamps; they are written to `out` at exit."""
    import atexit
    import dataclasses

    import minibroker.broker.handlers  # noqa: F401 — registers the handlers wrapped below
    from minibroker.broker import dispatch, fetcher, partition, replica_manager
    from minibroker.cli import main
    from minibroker.network import client, tcp

    events: list = []
    stamp = time.perf_counter

    def wrap(cls, name: str, tag: str, after: bool = False, only=None, given=None) -> None:
        fn = getattr(cls, name)

        def stamped(self, *a, **k):
            if not after and (given is None or given(*a)):
                events.append((stamp(), tag, getattr(self, "node_id", None)))
            r = fn(self, *a, **k)
            if after and (only is None or only(r)):
                events.append((stamp(), tag, getattr(self, "node_id", None)))
            return r
        setattr(cls, name, stamped)

    def wrap_handler(key: int, start: str, end: str) -> None:
        h = dispatch.HANDLERS[key]

        async def stamped(ctx, req):
            events.append((stamp(), start, ctx.node_id))
            r = await h.fn(ctx, req)
            events.append((stamp(), end, ctx.node_id))
            return r
        dispatch.HANDLERS[key] = dataclasses.replace(h, fn=stamped)

    wrap_handler(0, "produce_in", "produce_done")
    wrap_handler(1, "fetch_in", "fetch_out")
    wrap(replica_manager.ReplicaManager, "append_records", "appended", after=True)
    wrap(fetcher.ReplicaFetcher, "_handle_response", "follower_response")
    wrap(fetcher.ReplicaFetcher, "_build_request", "follower_request")
    wrap(partition.Partition, "maybe_increment_high_watermark", "hw_moved", after=True, only=bool)
    wrap(tcp.KafkaServerConnection, "_write", "server_write", given=bool)    # a response written
    wrap(tcp.KafkaServerConnection, "_handle_frames", "server_read")
    wrap(client.KafkaClientConnection, "_handle_frames", "client_read")
    atexit.register(lambda: json.dump(events, open(out, "w")))
    sys.argv = ["minibroker", "serve", "--port", "0", "--brokers", "3",
                "--override", "min.insync.replicas=2"]
    main()


def writes(events: list) -> list[list]:
    """Each write's hops: from the server read before produce_in to the write after produce_done."""
    out, i = [], 0
    while i < len(events):
        if events[i][1] == "produce_in":
            j = i
            while j < len(events) and events[j][1] != "produce_done":
                j += 1
            k = j
            while k < len(events) and events[k][1] != "server_write":
                k += 1
            if k < len(events):
                start = i - 1 if i and events[i - 1][1] == "server_read" else i
                out.append(events[start:k + 1])
            i = k
        i += 1
    return out


def report(events: list) -> None:
    ws = writes(events)
    ws = ws[len(ws) // 3:]              # the first third warms up
    if not ws:
        sys.exit("no acks=all write was stamped")
    name = lambda w: tuple(f"{e[1]}@{e[2] if e[2] is not None else '-'}" for e in w)  # noqa: E731
    pattern, n = collections.Counter(name(w) for w in ws).most_common(1)[0]
    rows = [w for w in ws if name(w) == pattern]
    print(f"{n} of {len(ws)} writes take the most common path; median us before each hop "
          f"(@broker; - a connection):")
    for i, hop in enumerate(pattern):
        gap = statistics.median((w[i][0] - w[i - 1][0]) * 1e6 for w in rows) if i else 0.0
        print(f"  {gap:7.1f}  {hop}")
    print(f"  {statistics.median((w[-1][0] - w[0][0]) * 1e6 for w in rows):7.1f}  read to write")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--idle-topics", type=int, default=5)
    ap.add_argument("--duration", type=float, default=4)
    ap.add_argument("--warm-cpu", action="store_true")
    ap.add_argument("--serve-stamped", metavar="OUT", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_stamped:
        serve_stamped(a.serve_stamped)
        return
    out = os.path.join(tempfile.mkdtemp(prefix="mb-hops-"), "hops.json")
    broker = subprocess.Popen(["taskset", "-c", "1", sys.executable, os.path.abspath(__file__),
                               "--serve-stamped", out], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": REPO})
    try:
        bootstrap = broker.stdout.readline().decode().split()[1]
        lat = [sys.executable, os.path.join(REPO, "benchmarks", "latency.py"), "--brokers", "3",
               "--idle-topics", str(a.idle_topics), "--duration", str(a.duration),
               "--bootstrap", bootstrap] + (["--warm-cpu"] if a.warm_cpu else [])
        res = subprocess.run(lat, capture_output=True, text=True, timeout=a.duration + 120)
        print(next((ln for ln in res.stdout.splitlines() if ln.startswith("brokers=")),
                   res.stdout + res.stderr).strip())
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(60)
    with open(out) as f:
        report(json.load(f))


if __name__ == "__main__":
    main()
