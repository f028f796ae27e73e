#!/usr/bin/env python3
"""Round-trip probe: produce latency at a fixed rate against a fresh minibroker (or any BOOTSTRAP).

    python benchmarks/latency.py [--brokers 1|3] [--rate 500] [--duration 5] [--acks all] [--idle-topics N]
                                 [--override K=V ...] [--bootstrap B] [--warm-cpu] [--group]

Same measurement as load.py's latency_100B_acks_all (confluent-kafka, linger.ms=0, delivery-report
latency), but alone, so a latency change can be checked in seconds. The broker is pinned to CPU 1 and
this process to CPU 0 like anchor.py. Topics are created with RF = --brokers (min.insync.replicas 2
when RF 3, as run.py's mb3). Needs $PERF_DIR's venv (re-executes itself under it).
--group first polls a consumer with a group.id (assign(), no join), as load.py's consume rows do:
that creates __consumer_offsets (50 partitions, RF 3 on 3 brokers), which run.py's RF 3 cluster
holds when it measures the round trip, and whose partitions are in every follower's fetch session.
--warm-cpu keeps CPU 1 from idling while measuring (a busy loop at SCHED_IDLE, which runs only when
the broker does not): what is left is the broker's own work, without this VM's wake-up from idle.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# Bounded (60 s) in case this process dies without stopping it.
_SPIN = ("import os, time\n"
         "os.sched_setaffinity(0, {1}); os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
         "end = time.monotonic() + 60\n"
         "while time.monotonic() < end: pass\n")


def poll_with_group(bootstrap: str, topic: str) -> None:
    """Poll partition 0 of `topic` for 2 s with a group.id and assign() (no join), as load.py's
    consume rows do: the broker creates __consumer_offsets for the group's coordinator."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-group", "log_level": 0,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    end = time.monotonic() + 2
    while time.monotonic() < end:
        c.poll(0.1)
    c.close()


def _cpu_s(proc) -> float:
    """The served broker's CPU seconds so far (every thread), 0 for a broker not started here."""
    if proc is None:
        return 0.0
    total = 0
    for task in os.listdir(f"/proc/{proc.pid}/task"):
        with open(f"/proc/{proc.pid}/task/{task}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", type=int, default=1)
    ap.add_argument("--rate", type=float, default=500)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--acks", default="all")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--idle-topics", type=int, default=0,
                    help="first create N more topics of 4 partitions, never written (run.py's RF 3 "
                         "cluster holds five, its earlier scenarios', when it measures this)")
    ap.add_argument("--override", action="append", default=[], metavar="K=V",
                    help="passed to serve (e.g. minibroker.inter.broker.sockets=true)")
    ap.add_argument("--bootstrap")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the broker")
    ap.add_argument("--group", action="store_true",
                    help="first poll a consumer with a group.id (creates __consumer_offsets)")
    ap.add_argument("--warm-cpu", action="store_true",
                    help="a SCHED_IDLE busy loop on CPU 1 while measuring (the broker's CPU never idles)")
    a = ap.parse_args()
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        venv = os.path.join(os.environ.get("PERF_DIR", "/tmp/minibroker-perf"), "venv", "bin", "python")
        os.execv(venv, [venv, os.path.abspath(__file__), *sys.argv[1:], "--python", a.python])
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    proc = spinner = None
    bs = a.bootstrap
    if bs is None:
        cmd = ["taskset", "-c", "1", a.python, "-m", "minibroker", "serve", "--port", "0",
               "--brokers", str(a.brokers)]
        if a.brokers >= 3:
            cmd += ["--override", "min.insync.replicas=2"]
        for kv in a.override:
            cmd += ["--override", kv]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
        bs = proc.stdout.readline().decode().split()[1]
    try:
        os.sched_setaffinity(0, {0})
        topic = f"lat-{int(time.time())}-{os.getpid()}"
        admin = AdminClient({"bootstrap.servers": bs, "log_level": 3})
        rf = min(a.brokers, 3)
        try:
            new = [NewTopic(topic, a.partitions, rf)] + [NewTopic(f"{topic}-idle-{i}", 4, rf)
                                                         for i in range(a.idle_topics)]
            for f in admin.create_topics(new).values():
                f.result(15)
        except Exception as e:  # the librdkafka mock has no CreateTopics: it auto-creates
            print(f"CreateTopics failed ({e.args[0].str() if e.args else e}); relying on auto-creation")
        if a.group:
            poll_with_group(bs, topic)
        p = Producer({"bootstrap.servers": bs, "acks": a.acks, "linger.ms": 0, "log_level": 3})
        for _ in range(20):
            p.produce(topic, b"warmup")
        p.flush(15)
        lats: list[float] = []
        errs: list[str] = []
        value = os.urandom(100)
        total = int(a.rate * a.duration)
        if a.warm_cpu:
            spinner = subprocess.Popen([sys.executable, "-c", _SPIN])
        cpu0 = _cpu_s(proc)
        t0 = time.perf_counter()
        for i in range(total):
            due = t0 + i / a.rate
            while True:
                now = time.perf_counter()
                if now >= due:
                    break
                p.poll(min(due - now, 0.01))
            ts = time.perf_counter()

            def cb(err, msg, ts=ts):
                if err is not None:
                    errs.append(str(err))
                else:
                    lats.append((time.perf_counter() - ts) * 1000)
            p.produce(topic, value, on_delivery=cb)
            p.poll(0)
        p.flush(30)
        cpu = _cpu_s(proc) - cpu0 if proc is not None else float("nan")
        lats.sort()

        def pct(q):
            return lats[min(len(lats) - 1, int(len(lats) * q / 100))] if lats else float("nan")
        print(f"brokers={a.brokers} rate={a.rate:g}/s acks={a.acks} n={len(lats)} errors={len(errs)} "
              f"p50={pct(50):.3f} ms p90={pct(90):.3f} ms p99={pct(99):.3f} ms max={lats[-1] if lats else 0:.3f} ms"
              f" broker_cpu={cpu / max(total, 1) * 1e6:.0f} us/msg" + (" (warm CPU)" if a.warm_cpu else ""))
    finally:
        for child in (spinner, proc):
            if child is not None:
                child.terminate()
                child.wait(10)


if __name__ == "__main__":
    main()
