#!/usr/bin/env python3
"""Python work per acks=all produce on a served RF 3 cluster, counted, not timed.

    python benchmarks/rf3_calls.py [--brokers 3] [--messages 2000] [--top 15] [--idle-topics 0] [--group]

Starts `python -m cProfile -m minibroker serve --port 0 --brokers N` (min.insync.replicas 2), creates
a topic with RF min(N, 3) and 1 partition, and produces --messages 100-byte records one at a time
with confluent-kafka (acks=all, linger.ms=0: one batch per request, each acknowledged before the next
is sent). It then stops the broker (SIGTERM: serve exits cleanly, cProfile writes its profile) and
prints, per produced record: the broker's Python function calls, Fetch requests answered to
followers, and the functions called most often. On a shared, loaded machine these counts stay put
where timings do not (docs/performance.md); the fetch count is what a missed or extra wake-up shows.
--idle-topics N first creates N more topics of 4 partitions each, never written: run.py's RF 3
cluster holds five such topics (its earlier scenarios') when it measures the round trip.
--group first polls a consumer with a group.id, as load.py's consume rows do: that creates
__consumer_offsets (50 partitions, RF 3 on 3 brokers), which run.py's RF 3 cluster also holds.
"""
from __future__ import annotations

import argparse
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--idle-topics", type=int, default=0)
    ap.add_argument("--group", action="store_true")
    a = ap.parse_args()
    base, _ = run(a, 0)         # start-up, topic creation and warm-up alone
    st, done = run(a, a.messages)
    per = {k: (v - base.get(k, 0)) / done for k, v in st.items()}
    calls = sum(per.values())
    # k01_fetch._response encodes each answer once; cProfile counts a coroutine (fetch_records,
    # handle_fetch) once per resumption, so those count a parked fetch twice.
    fetches = sum(v for k, v in per.items() if k[2] == "_response" and k[0].endswith("k01_fetch.py"))
    produces = sum(v for k, v in per.items() if k[2] == "append_records")
    print(f"{done} acks=all records ({a.brokers} brokers, {a.idle_topics} idle topics"
          f"{', __consumer_offsets' if a.group else ''}), per record, start-up and warm-up "
          f"subtracted: {calls:,.0f} Python calls in the broker process, {fetches:.2f} Fetch "
          f"requests answered, {produces:.2f} Produce appends")
    print("most called (calls per record):")
    for (f, line, name), v in sorted(per.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"  {v:8.2f}  {name}  ({os.path.basename(f)}:{line})")


def run(a, messages: int) -> tuple[dict, int]:
    """Call counts of a served cluster's process, by function, after `messages` records (and, with
    messages=0, the start-up and warm-up alone); the records acknowledged."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    out = os.path.join(tempfile.mkdtemp(prefix="mb-rf3-"), "broker.prof")
    cmd = [sys.executable, "-m", "cProfile", "-o", out, "-m", "minibroker", "serve", "--port", "0",
           "--brokers", str(a.brokers), "--override", f"min.insync.replicas={min(2, a.brokers)}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": REPO})
    bs = proc.stdout.readline().decode().split()[1]
    done = 0
    try:
        topic = "rf3-calls"
        admin = AdminClient({"bootstrap.servers": bs, "log_level": 0})
        rf = min(a.brokers, 3)
        new = [NewTopic(topic, 1, rf)] + [NewTopic(f"idle-{i}", 4, rf) for i in range(a.idle_topics)]
        for f in admin.create_topics(new).values():
            f.result(30)
        if a.group:
            from latency import poll_with_group    # benchmarks/latency.py, beside this script
            poll_with_group(bs, topic)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0, "log_level": 0,
                      "enable.idempotence": False, "max.in.flight": 1})
        for _ in range(20):         # warm-up: metadata, connections, the followers' first fetches
            p.produce(topic, b"w" * 100)
            p.flush(30)
        deadline = time.monotonic() + 120
        for _ in range(messages):
            p.produce(topic, b"x" * 100)
            p.flush(30)
            done += 1
            if time.monotonic() > deadline:
                break
        del p, admin                # disconnect before the broker stops
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    return {k: v[1] for k, v in pstats.Stats(out).stats.items()}, done

if __name__ == "__main__":
    main()
