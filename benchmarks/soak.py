#!/usr/bin/env python3
"""The soak of issue 42's must-show 7: does any follower stay out of the ISR too long?

    python benchmarks/soak.py [--minutes 120] [--rate 200] [--producers 2] [--consumers 2]
                              [--partitions 6] [--record-bytes 100] [--poll-ms 200]
                              [--busy-loops 2] [--drain-seconds 120] [--self-check-partition S]

"A 2-hour soak of `serve` under two busy loops with producers and consumers on every broker's
partitions: no follower leaves the ISR for longer than replica.lag.time.max.ms plus one fetch."

Starts the README's `python -m minibroker serve` (3 brokers, every default) with only `--port 0`
so that it does not collide with a running one, and --busy-loops children spinning
(`while True: pass`). A topic of --partitions partitions, replication factor 3 and
min.insync.replicas=2 (topic configs through CreateTopics; serve's defaults are untouched) must
have leaders on every broker. confluent-kafka producers (idempotent, acks=all, each at most
--rate records/s, partitions in turn) and a consumer group read everything for --minutes; then
the producers flush and the consumers get --drain-seconds to catch up. A monitor reads every
partition's ISR (Metadata through librdkafka's AdminClient) every --poll-ms and keeps, per
partition and replica, each interval from first seen out of the ISR to first seen back in.

Prints a progress line every minute, and at the end: the longest interval, how many exceeded
the bound (replica.lag.time.max.ms + replica.fetch.wait.max.ms, the brokers' effective values
from DescribeConfigs), acked and consumed counts, every acked record not consumed (checked by
producer and sequence number in the key), the serve process's RSS at start and end, and a
PASS/FAIL line. `--self-check-partition 40` checks the monitor itself: serve runs with
`--faults` and broker 3 is cut from the others for 40 s at half time, so the run must FAIL.
Children are killed at the end, on Ctrl-C and when this process dies
(process groups, PR_SET_PDEATHSIG). Loopback only; run it under `nice -n 19`.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

from big_topic import _rss_mb

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPIC = "soak"
KEY = struct.Struct(">HQ")          # producer index, sequence number
PR_SET_PDEATHSIG = 1


def _spawn(argv: list[str], death_signal: int, **kw) -> subprocess.Popen:
    """A child in its own process group, sent `death_signal` if this process dies first."""
    libc = ctypes.CDLL(None, use_errno=True)

    def _pre() -> None:
        libc.prctl(PR_SET_PDEATHSIG, death_signal)
    return subprocess.Popen(argv, cwd=REPO, start_new_session=True, preexec_fn=_pre,
                            env={**os.environ, "PYTHONPATH": REPO}, **kw)


def _stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, wait_s: float = 30) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    except ProcessLookupError:
        pass


class Ledger:
    """Which (producer, seq) were acked and which consumed; producers' delivery callbacks and
    the consumers share it. Counted as they arrive, so that the drain's check is O(1)."""

    def __init__(self, producers: int, capacity: int) -> None:
        self.acked = [bytearray(capacity) for _ in range(producers)]
        self.seen = [bytearray(capacity) for _ in range(producers)]
        self.failed = [0] * producers
        self.n_acked = self.n_seen = self.n_both = 0
        self.consumed = self.duplicates = self.out_of_order = 0
        self.last: dict[tuple[int, int], int] = {}      # (producer, partition) -> last seq
        self.lock = threading.Lock()

    def on_acked(self, producer: int, seq: int) -> None:
        with self.lock:
            self.acked[producer][seq] = 1
            self.n_acked += 1
            self.n_both += self.seen[producer][seq]     # a consumer may see it before the ack

    def on_consumed(self, producer: int, seq: int, partition: int) -> None:
        with self.lock:
            self.consumed += 1
            if self.seen[producer][seq]:
                self.duplicates += 1
                return
            self.seen[producer][seq] = 1
            self.n_seen += 1
            self.n_both += self.acked[producer][seq]
            if seq < self.last.get((producer, partition), -1):
                self.out_of_order += 1
            self.last[(producer, partition)] = seq

    @property
    def lost(self) -> int:
        """Acked but not (yet) consumed."""
        return self.n_acked - self.n_both

    def lost_examples(self, limit: int = 10) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        for p, (a, s) in enumerate(zip(self.acked, self.seen)):
            if len(out) < limit and self.lost:
                out += [(p, i) for i in range(len(a)) if a[i] and not s[i]][:limit - len(out)]
        return out


def produce(bootstrap: str, index: int, args, ledger: Ledger, end: float, partitions: int) -> None:
    """One producer at most args.rate records/s until `end`; behind schedule it skips ahead
    rather than bursting. Flushes with a bounded wait."""
    from confluent_kafka import Producer

    def done(err, msg):
        _, seq = KEY.unpack(msg.key())
        if err is None:
            ledger.on_acked(index, seq)
        else:
            ledger.failed[index] += 1
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "client.id": f"soak-producer-{index}"})
    pad = b"x" * max(0, args.record_bytes - KEY.size)
    t0, seq = time.monotonic(), 0
    while seq < len(ledger.acked[index]) and (now := time.monotonic()) < end:
        due = t0 + seq / args.rate
        if due > now:
            p.poll(min(due - now, 0.5))
            continue
        if now - due > 1.0:                 # more than a second behind: skip, not burst
            t0 = now - seq / args.rate
        key = KEY.pack(index, seq)
        try:
            p.produce(TOPIC, key + pad, key=key, partition=seq % partitions, on_delivery=done)
        except BufferError:
            p.poll(0.05)
            continue
        seq += 1
        p.poll(0)
    left = p.flush(60)
    if left:
        print(f"producer {index}: {left} records unacknowledged after a 60 s flush", flush=True)


def consume(bootstrap: str, index: int, group: str, ledger: Ledger, stop: threading.Event) -> None:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "client.id": f"soak-consumer-{index}"})
    c.subscribe([TOPIC])
    try:
        while not stop.is_set():
            for m in c.consume(500, 0.5):
                if m.error():
                    print(f"consumer {index}: {m.error()}", flush=True)
                    continue
                producer, seq = KEY.unpack(m.key())
                ledger.on_consumed(producer, seq, m.partition())
    finally:
        c.close()


class IsrMonitor:
    """Every partition's ISR each poll: per (partition, replica), each interval out of it."""

    def __init__(self, admin, poll_s: float) -> None:
        self.admin, self.poll_s = admin, poll_s
        self.out_since: dict[tuple[int, int], float] = {}
        self.intervals: list[tuple[int, int, float, float]] = []   # partition, replica, from, to
        self.polls = self.failed = self.leader_changes = 0
        self.longest_blind = 0.0
        self.leaders: dict[int, int] = {}
        self.last_ok: float | None = None
        self.still_out: list[tuple[int, int]] = []    # set by close()

    def observe(self, partitions, now: float) -> None:
        for pid in sorted(partitions):
            meta = partitions[pid]
            if pid in self.leaders and self.leaders[pid] != meta.leader:
                self.leader_changes += 1
            self.leaders[pid] = meta.leader
            for r in sorted(meta.replicas):
                key = (pid, r)
                if r not in meta.isrs:
                    self.out_since.setdefault(key, now)
                elif key in self.out_since:
                    self.intervals.append((pid, r, self.out_since.pop(key), now))

    def run(self, start: float, stop: threading.Event) -> None:
        self.last_ok = start
        while not stop.is_set():
            t = time.monotonic()
            try:
                md = self.admin.list_topics(TOPIC, timeout=max(1.0, self.poll_s * 5))
                self.observe(md.topics[TOPIC].partitions, time.monotonic())
                self.polls += 1
                self.longest_blind = max(self.longest_blind, time.monotonic() - self.last_ok)
                self.last_ok = time.monotonic()
            except Exception:               # a timeout under load: counted, the gap measured
                self.failed += 1
            stop.wait(max(0.0, self.poll_s - (time.monotonic() - t)))

    def close(self, now: float) -> list[tuple[int, int, float, float]]:
        """The intervals, those still open ending now (flagged by `still_out`)."""
        self.still_out = sorted(self.out_since)
        self.longest_blind = max(self.longest_blind, now - (self.last_ok or now))
        return self.intervals + [(p, r, s, now) for (p, r), s in sorted(self.out_since.items())]


def _start_serve(log, faults: bool) -> tuple[subprocess.Popen, str]:
    argv = [sys.executable, "-m", "minibroker", "serve", "--port", "0"] + ["--faults"] * faults
    serve = _spawn(argv, signal.SIGTERM, stdout=subprocess.PIPE, stderr=log, text=True)
    line = serve.stdout.readline()          # serve prints it once listening, or exits
    if not line.startswith("BOOTSTRAP "):
        raise SystemExit(f"serve did not start: {line!r} (its log: {log.name})")
    return serve, line.split()[1]


def _create_topic(admin, partitions: int) -> None:
    """RF 3, min.insync.replicas=2; waits (bounded) for a leader everywhere, and checks that
    the leaders cover every broker."""
    from confluent_kafka.admin import NewTopic
    admin.create_topics([NewTopic(TOPIC, partitions, 3,
                                  config={"min.insync.replicas": "2"})])[TOPIC].result(30)
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(TOPIC, timeout=10)
        parts = md.topics[TOPIC].partitions
        if len(parts) == partitions and all(p.leader >= 0 for p in parts.values()):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{TOPIC}: partitions without a leader after 30 s")
        time.sleep(0.2)
    leaders = {p.leader for p in parts.values()}
    if leaders != set(md.brokers):
        raise SystemExit(f"leaders {sorted(leaders)} do not cover brokers {sorted(md.brokers)}: "
                         "use more partitions")
    print(f"topic {TOPIC}: {partitions} partitions, RF 3, min.insync.replicas=2, leaders "
          + " ".join(f"{pid}->{parts[pid].leader}" for pid in sorted(parts)), flush=True)


def _bound_ms(admin) -> tuple[int, int]:
    """The brokers' effective replica.lag.time.max.ms and replica.fetch.wait.max.ms (the largest
    over the brokers, should they differ)."""
    from confluent_kafka.admin import ConfigResource
    brokers = sorted(admin.list_topics(timeout=10).brokers)
    names = ("replica.lag.time.max.ms", "replica.fetch.wait.max.ms")
    found = {n: [] for n in names}
    for b in brokers:                       # librdkafka: one BROKER resource per call
        (fut,) = admin.describe_configs([ConfigResource("BROKER", str(b))]).values()
        entries = fut.result(30)
        for n in names:
            found[n].append(int(entries[n].value))
    return max(found[names[0]]), max(found[names[1]])


def _cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds (/proc/PID/stat: utime, stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cut_broker_3(bootstrap: str, at: float, seconds: float, stop: threading.Event) -> None:
    """The monitor's self-check: broker 3 cut from 1 and 2 for `seconds` from `at`, then healed."""
    def faults(*cmd: str) -> None:
        subprocess.run([sys.executable, "-m", "minibroker", "faults", "--bootstrap-server",
                        bootstrap, *cmd], cwd=REPO, check=True, capture_output=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": REPO})
    if stop.wait(max(0.0, at - time.monotonic())):
        return
    faults("partition", "3", "1,2")
    print(f"self-check: broker 3 cut from brokers 1 and 2 for {seconds:.0f} s", flush=True)
    stop.wait(seconds)
    faults("heal")
    print("self-check: healed", flush=True)


def _progress(start: float, ledger: Ledger, mon: IsrMonitor, serve_pid: int) -> str:
    intervals = mon.intervals
    longest = max((b - a for _, _, a, b in intervals), default=0.0)
    return (f"[{(time.monotonic() - start) / 60:5.1f} min] acked {ledger.n_acked:,} (failed "
            f"{sum(ledger.failed)}), consumed {ledger.consumed:,}; ISR: {len(intervals)} intervals "
            f"out, longest {longest * 1000:,.0f} ms, {len(mon.out_since)} out now; polls "
            f"{mon.polls:,} (failed {mon.failed}); serve RSS {_rss_mb(serve_pid):,.0f} MB; load "
            + " ".join(f"{x:.1f}" for x in os.getloadavg()))


def _drain(ledger: Ledger, seconds: float) -> float:
    """Until every acked record was consumed, at most `seconds`; returns the seconds taken."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        if not ledger.lost:
            break
        time.sleep(1.0)
    return time.monotonic() - t0


def _report(args, ledger: Ledger, mon: IsrMonitor, bound: tuple[int, int],
            rss: tuple[float, float], cpu: tuple[float, float, float]) -> bool:
    lag_ms, wait_ms = bound
    limit_s = (lag_ms + wait_ms) / 1000
    intervals = mon.close(time.monotonic())
    over = [iv for iv in intervals if iv[3] - iv[2] > limit_s]
    longest = max(intervals, key=lambda iv: iv[3] - iv[2], default=None)
    acked, unique, lost = ledger.n_acked, ledger.n_seen, ledger.lost
    print(f"# soak: {args.minutes} min, {args.producers} producer(s) at <= {args.rate}/s, "
          f"{args.consumers} consumer(s), {args.partitions} partitions RF 3, "
          f"{args.busy_loops} busy loop(s), ISR polled every {args.poll_ms} ms")
    print(f"bound: replica.lag.time.max.ms {lag_ms} + replica.fetch.wait.max.ms {wait_ms} = "
          f"{lag_ms + wait_ms} ms")
    print(f"ISR polls: {mon.polls:,} answered, {mon.failed} failed, longest without an answer "
          f"{mon.longest_blind * 1000:,.0f} ms; leader changes seen {mon.leader_changes}")
    print(f"out-of-ISR intervals: {len(intervals)}, still out at the end {len(mon.still_out)}, "
          f"over the bound {len(over)}")
    if longest:
        p, r, a, b = longest
        print(f"longest: partition {p} replica {r}, {(b - a) * 1000:,.0f} ms")
    for p, r, a, b in over[:10]:
        print(f"  over: partition {p} replica {r}, {(b - a) * 1000:,.0f} ms")
    print(f"records: acked {acked:,}, failed deliveries {sum(ledger.failed)}, consumed "
          f"{ledger.consumed:,} ({unique:,} distinct, {ledger.duplicates:,} again), out of "
          f"order {ledger.out_of_order}, acked but not consumed {lost:,}")
    for prod, seq in ledger.lost_examples():
        print(f"  lost: producer {prod} seq {seq}")
    print(f"serve RSS: start {rss[0]:,.0f} MB, end {rss[1]:,.0f} MB; CPU seconds over the run: "
          f"serve {cpu[0]:,.0f}, these clients {cpu[1]:,.0f} ({cpu[2]:,.0f} s elapsed)")
    blind = mon.longest_blind > limit_s
    if blind:
        print("the monitor went unanswered longer than the bound: the ISR was not watched")
    ok = not over and not lost and not blind and acked > 0 and not ledger.out_of_order
    print(("PASS" if ok else "FAIL") + " (must-show 7): no follower out of the ISR longer than "
          f"replica.lag.time.max.ms plus one fetch ({lag_ms + wait_ms} ms), every acked record "
          "consumed")
    return ok


def _soak(args, bootstrap: str, serve_pid: int) -> bool:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    _create_topic(admin, args.partitions)
    bound = _bound_ms(admin)
    rss_start = _rss_mb(serve_pid)
    cpu_start = (_cpu_s(serve_pid), sum(os.times()[:2]))
    ledger = Ledger(args.producers, int(args.rate * args.minutes * 60) + 1)
    mon = IsrMonitor(admin, args.poll_ms / 1000)
    stop_mon, stop_consumers = threading.Event(), threading.Event()
    start = time.monotonic()
    end = start + args.minutes * 60
    threads = [threading.Thread(target=mon.run, args=(start, stop_mon), daemon=True)]
    threads += [threading.Thread(target=consume, daemon=True,
                                 args=(bootstrap, i, f"soak-{os.getpid()}", ledger, stop_consumers))
                for i in range(args.consumers)]
    producers = [threading.Thread(target=produce, daemon=True,
                                  args=(bootstrap, i, args, ledger, end, args.partitions))
                 for i in range(args.producers)]
    if args.self_check_partition:
        threads.append(threading.Thread(target=_cut_broker_3, daemon=True, args=(
            bootstrap, start + args.minutes * 30, args.self_check_partition, stop_mon)))
    for t in threads + producers:
        t.start()
    while (now := time.monotonic()) < end:
        time.sleep(min(60 - (now - start) % 60, end - now))
        print(_progress(start, ledger, mon, serve_pid), flush=True)
    for t in producers:
        t.join(90)                          # their flush is bounded at 60 s
    drained = _drain(ledger, args.drain_seconds)
    print(f"drained in {drained:.1f} s; " + _progress(start, ledger, mon, serve_pid), flush=True)
    stop_mon.set()
    stop_consumers.set()
    for t in threads:
        t.join(30)
    cpu = (_cpu_s(serve_pid) - cpu_start[0], sum(os.times()[:2]) - cpu_start[1],
           time.monotonic() - start)
    return _report(args, ledger, mon, bound, (rss_start, _rss_mb(serve_pid)), cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=120)
    ap.add_argument("--rate", type=float, default=200, help="records/s per producer, at most")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--record-bytes", type=int, default=100)
    ap.add_argument("--poll-ms", type=int, default=200)
    ap.add_argument("--busy-loops", type=int, default=2)
    ap.add_argument("--drain-seconds", type=float, default=120)
    ap.add_argument("--self-check-partition", type=float, default=0, metavar="SECONDS",
                    help="check the monitor: serve with --faults, and broker 3 cut from the "
                         "others for SECONDS at half time (past the bound, the run must FAIL)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))    # so that `finally` runs
    busy: list[subprocess.Popen] = []
    serve = None
    with tempfile.NamedTemporaryFile("w+", prefix="soak-serve-", suffix=".log",
                                     delete=False) as log:
        try:
            serve, bootstrap = _start_serve(log, args.self_check_partition > 0)
            busy = [_spawn([sys.executable, "-c", "while True: pass"], signal.SIGKILL)
                    for _ in range(args.busy_loops)]
            ok = _soak(args, bootstrap, serve.pid)
        finally:
            for b in busy:
                _stop(b, signal.SIGKILL)
            if serve is not None:
                _stop(serve)
        log.seek(0)
        warnings = [l for l in log if " WARNING " in l or " ERROR " in l or "Traceback" in l]
    print(f"serve's log: {len(warnings)} WARNING/ERROR/Traceback lines"
          + (f" ({log.name}, the last 5 follow)" if warnings else "")
          + "".join(f"\n  {l.rstrip()}" for l in warnings[-5:]))
    if not warnings:
        os.unlink(log.name)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
