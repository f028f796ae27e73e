"""The long mutation fuzz run (issue 25): mutated client requests against a real `minibroker serve`,
while a well-behaved client measures its latencies on connections of its own.

    nice -n 19 python3 benchmarks/fuzz_long.py --frames 1000000 --max-seconds 3600

Seeds are valid requests built with kafka-python's encoders (tests/fuzz/corpus.py: ApiVersions,
Metadata, Produce, Fetch, ListOffsets, the group APIs, CreateTopics, ...); each frame sent is one
of them with 1-4 mutations (bit flips, interesting bytes and int32s, cuts, duplicated or deleted
slices; half of the time past the request header, so that they reach the handlers), or, one time
in eight, a valid header of a random API and version with random bytes. A share (--extremes,
default 1/4) are instead well-formed requests of any served API and version with every field at
an extreme: null, empty, max/min int, negative (tests/fuzz/extremes.py, as the CI property test).

--parallel fuzzing connections each keep --window frames unanswered: most mutated frames are
refused by closing the connection (as Kafka does), and the frames behind a refused one are never
executed, so a connection is reopened only when the broker closed it (or answered nothing for
1 s: frames the broker holds, such as long-poll Fetch, JoinGroup, acks=0 Produce). A janitor (a
well-behaved admin connection) deletes the topics the fuzzing created every --janitor-seconds,
else the cluster only grows (mutated CreateTopics and CreatePartitions ask for up to 10,000
partitions at a time). The broker runs in its own process (started here, same niceness), the
probe client in another: ApiVersions, Metadata, Produce acks=1 and Fetch round trips every 20 ms.

Prints: frames processed (answered, or refused by closing the connection) and per second, broker
crashes (the process ended), handler exceptions and tracebacks in its log, connections the broker
closed, the probe's p50/p99/max latency per request, the broker's RSS (start, peak, end and at
each tenth of the run) and the load average. Bounded by --frames and --max-seconds. Loopback only.
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
sys.path.insert(0, str(ROOT))

from corpus import mutate, seeds  # noqa: E402
from extremes import extreme_frame  # noqa: E402

IDLE = 1.0
PROBE_TOPIC = "probe"
PROFILED_SERVE = """
import cProfile, sys, time
from minibroker.cli import main
out, sys.argv = sys.argv[1], ["minibroker"] + sys.argv[2:]
profile = cProfile.Profile(time.process_time)
profile.enable()
try:
    main()
finally:
    profile.disable()
    profile.dump_stats(out)
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# ------------------------------------------------------------------ the well-behaved client
def probe_main(bootstrap: str, stop, out) -> None:
    """Round trips (ApiVersions, Metadata, Produce acks=1, Fetch) every 20 ms on its own
    connections; puts the latencies (seconds) on `out` when `stop` is set."""
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

    from minibroker.log.batch import build_batch
    from minibroker.network.client import KafkaClientConnection
    sys.path.insert(0, str(ROOT / "tests"))
    from cluster_helpers import fetch_request, produce_request

    async def run():
        lat: list[float] = []
        errors = 0
        hosts = [hp.rsplit(":", 1) for hp in bootstrap.split(",")]
        conns = [await KafkaClientConnection.connect(h, int(p), client_id="probe")
                 for h, p in hosts]
        md = await conns[0].request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            topic_id=None, name=PROBE_TOPIC)], allow_auto_topic_creation=True,
            include_topic_authorized_operations=False), 12)
        await asyncio.sleep(1)
        md = await conns[0].request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            topic_id=None, name=PROBE_TOPIC)], allow_auto_topic_creation=True,
            include_topic_authorized_operations=False), 12)
        leader = md.topics[0].partitions[0].leader_id
        by_id = {b.node_id: b for b in md.brokers}
        lconn = await KafkaClientConnection.connect(by_id[leader].host, by_id[leader].port,
                                                    client_id="probe")
        offset = 0
        while not stop.is_set():
            for req, version, conn in (
                    (ApiVersionsRequest(), 3, conns[0]),
                    (MetadataRequest(topics=[PROBE_TOPIC]), 1, conns[-1]),
                    (produce_request(PROBE_TOPIC, 0, bytes(build_batch([(None, b"p" * 100, [])])),
                                     acks=1), 9, lconn),
                    (fetch_request(PROBE_TOPIC, 0, offset), 12, lconn)):
                t0 = time.perf_counter()
                try:
                    await conn.request(req, version, timeout=10)
                    lat.append(time.perf_counter() - t0)
                except Exception:  # noqa: BLE001 — counted; the probe keeps going
                    errors += 1
            offset += 1
            await asyncio.sleep(0.02)
        out.put((lat, errors))

    asyncio.run(run())


# ------------------------------------------------------------------ the fuzzer
class Stats:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.frames = 0             # sent
        self.processed = 0          # answered, or refused by closing the connection
        self.connections = 0
        self.closed_by_broker = 0
        self.timeouts = 0
        self.deleted_topics = 0


def _frame(corpus, headers, rng, extremes: float = 0.0) -> bytes:
    if rng.random() < extremes:     # a served schema with its fields at extremes (issue 42)
        cls, version = rng.choice(headers)[3]
        body = extreme_frame(cls, version, rng)
        if body is not None:
            return struct.pack(">i", len(body)) + body
    if rng.random() < 0.125:
        _, _, head, _ = rng.choice(headers)
        body = head + rng.randbytes(rng.randrange(64))
    elif rng.random() < 0.5:
        body = mutate(rng.choice(corpus)[2], rng)
    else:           # the header kept: the mutations reach the handlers
        seed = rng.choice(corpus)[2]
        body = seed[:14] + mutate(seed[14:], rng)
    return struct.pack(">i", len(body)) + body


class FuzzConnection(asyncio.Protocol):
    """One connection keeping `window` frames unanswered. Most mutated frames are refused by
    closing the connection (Kafka's answer to a malformed request) and the frames queued behind
    a refused one are never executed, so a deep window only burns the fuzzer's CPU on frames the
    broker drops (the first harness kept 32 in flight: 34 frames sent per frame processed)."""

    def __init__(self, make_frame, stats: Stats, window: int) -> None:
        self.make_frame, self.stats, self.window = make_frame, stats, window
        self.buf = bytearray()
        self.outstanding = 0
        self.aborted = False
        self.done = asyncio.get_running_loop().create_future()
        self.last_answer = time.monotonic()
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.stats.connections += 1
        self.top_up()

    def top_up(self) -> None:
        n = self.window - self.outstanding
        if n > 0 and self.stats.processed < self.stats.limit:
            self.transport.write(b"".join(self.make_frame() for _ in range(n)))
            self.outstanding += n
            self.stats.frames += n

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        answered = 0
        while len(buf) >= 4:
            end = 4 + int.from_bytes(buf[:4], "big")
            if len(buf) < end:
                break
            del buf[:end]
            answered += 1
        if answered:
            self.outstanding -= answered
            self.stats.processed += answered
            self.last_answer = time.monotonic()
            self.top_up()

    def abort(self) -> None:
        self.aborted = True
        self.transport.abort()

    def connection_lost(self, exc) -> None:
        if self.outstanding and not self.aborted:    # the frame at the head was refused
            self.stats.closed_by_broker += 1
            self.stats.processed += 1
        if not self.done.done():
            self.done.set_result(None)


async def fuzz_connection(hosts, corpus, headers, rng, stats: Stats, window: int,
                          deadline: float, extremes: float) -> None:
    """Connections one after another until the limit or the deadline: each ends when the broker
    closes it, or is dropped once nothing was answered for IDLE seconds (frames the broker
    holds: long-poll Fetch, JoinGroup, acks=0 Produce)."""
    loop = asyncio.get_running_loop()
    while stats.processed < stats.limit and time.monotonic() < deadline:
        host, port = rng.choice(hosts)
        try:
            _, conn = await loop.create_connection(
                lambda: FuzzConnection(lambda: _frame(corpus, headers, rng, extremes), stats,
                                       window),
                host, port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        while not conn.done.done():
            await asyncio.wait([conn.done], timeout=IDLE / 4)
            now = time.monotonic()
            if conn.done.done():
                break
            if now - conn.last_answer >= IDLE:
                stats.timeouts += 1
                conn.abort()
            elif now >= deadline or (stats.processed >= stats.limit):
                conn.abort()
        await conn.done


async def janitor(hosts, stats: Stats, keep: set[str], every_s: float, deadline: float) -> None:
    """Deletes the topics the fuzzing created (mutated CreateTopics and auto-created names, up to
    10,000 partitions each) every `every_s`: without it the cluster only grows, and so does
    every mutated Metadata-for-all-topics answer. A well-behaved admin client on a connection of
    its own; what it deletes is counted."""
    from kafka.protocol.admin import DeleteTopicsRequest
    from kafka.protocol.metadata import MetadataRequest

    from minibroker.network.client import KafkaClientConnection
    host, port = hosts[0]
    conn = None
    while stats.processed < stats.limit and time.monotonic() < deadline:
        await asyncio.sleep(every_s)
        try:
            if conn is None or conn.closed:
                conn = await KafkaClientConnection.connect(host, port, client_id="janitor")
            md = await conn.request(MetadataRequest(topics=None), 1, timeout=30)
            names = sorted(t.name for t in md.topics
                           if t.name not in keep and not t.name.startswith("__"))
            for i in range(0, len(names), 100):
                await conn.request(DeleteTopicsRequest(topic_names=names[i:i + 100],
                                                       timeout_ms=30_000), 4, timeout=60)
            stats.deleted_topics += len(names)
        except Exception as e:  # noqa: BLE001 — reported; the next round retries
            print(f"janitor: {e!r}", file=sys.stderr)
            if conn is not None:
                conn.close()
                conn = None
    if conn is not None:
        conn.close()


async def fuzz(bootstrap: str, limit: int, max_seconds: float, seed: int, parallel: int,
               window: int, janitor_s: float, extremes: float) -> Stats:
    from minibroker.broker.dispatch import supported_versions
    import minibroker.broker.handlers  # noqa: F401 — registers the handlers
    from minibroker.broker.dispatch import HANDLERS
    hosts = [(h, int(p)) for h, p in (hp.rsplit(":", 1) for hp in bootstrap.split(","))]
    corpus = seeds()
    headers = []
    for key, lo, hi in supported_versions():
        for v in range(lo, hi + 1):
            flexible = v >= HANDLERS[key].flexible_from
            headers.append((key, v, struct.pack(">hhih", key, v, 1, 4) + b"fuzz"
                            + (b"\x00" if flexible else b""), (HANDLERS[key].request_class, v)))
    stats = Stats(limit)
    deadline = time.monotonic() + max_seconds
    jobs = [fuzz_connection(hosts, corpus, headers, random.Random(seed + i), stats, window,
                            deadline, extremes) for i in range(parallel)]
    if janitor_s > 0:
        jobs.append(janitor(hosts, stats, {PROBE_TOPIC}, janitor_s, deadline))
    await asyncio.gather(*jobs)
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1_000_000,
                    help="stop after this many frames answered or refused")
    ap.add_argument("--max-seconds", type=float, default=1800)
    ap.add_argument("--parallel", type=int, default=12, help="fuzzing connections at a time")
    ap.add_argument("--window", type=int, default=2,
                    help="frames each fuzzing connection keeps unanswered")
    ap.add_argument("--janitor-seconds", type=float, default=10,
                    help="delete the topics the fuzzing created this often (0: never)")
    ap.add_argument("--extremes", type=float, default=0.25,
                    help="share of frames that are served schemas with every field at an "
                         "extreme (null, empty, max/min int, negative), unmutated")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--profile-broker", metavar="FILE",
                    help="run the broker under cProfile, its stats written to FILE at the end")
    args = ap.parse_args()

    log = tempfile.NamedTemporaryFile(prefix="fuzz_long_broker_", suffix=".log", delete=False)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # CPU time, not wall time: on a shared machine the wall clock charges other processes' turns
    # to whatever function was running.
    run_broker = (["-c", PROFILED_SERVE, args.profile_broker] if args.profile_broker
                  else ["-m", "minibroker"])
    broker = subprocess.Popen(
        [sys.executable, *run_broker, "serve", "--brokers", str(args.brokers), "--port", "0",
         "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=str(ROOT))
    bootstrap = None
    for line in broker.stdout:
        if line.startswith("BOOTSTRAP "):
            bootstrap = line.split()[1].strip()
            break
    if bootstrap is None:
        sys.exit("the broker did not start; see " + log.name)
    time.sleep(1)
    rss = [(0.0, rss_kib(broker.pid))]
    cpu_start = cpu_seconds(broker.pid)
    stop = multiprocessing.Event()
    out = multiprocessing.Queue()
    probe = multiprocessing.Process(target=probe_main, args=(bootstrap, stop, out))
    probe.start()
    load = [os.getloadavg()[0]]

    async def run():
        t0 = time.monotonic()

        async def watch():
            while broker.poll() is None:
                rss.append((time.monotonic() - t0, rss_kib(broker.pid)))
                load.append(os.getloadavg()[0])
                await asyncio.sleep(1)
        w = asyncio.ensure_future(watch())
        stats = await fuzz(bootstrap, args.frames, args.max_seconds, args.seed, args.parallel,
                           args.window, args.janitor_seconds, args.extremes)
        w.cancel()
        return stats, time.monotonic() - t0

    stats, elapsed = asyncio.run(run())
    stop.set()
    latencies, probe_errors = out.get(timeout=60)
    probe.join(10)
    crashed = broker.poll() is not None
    rss.append((elapsed, rss_kib(broker.pid)))
    broker_cpu = cpu_seconds(broker.pid) - cpu_start
    if not crashed:
        broker.send_signal(signal.SIGINT if args.profile_broker else signal.SIGTERM)
        try:
            broker.wait(60)
        except subprocess.TimeoutExpired:
            print("the broker did not stop within 60 s: killed")
            broker.kill()
            broker.wait()
    text = Path(log.name).read_text(errors="replace")
    handler_failed = text.count("handler failed")
    tracebacks = text.count("Traceback (most recent call last)")
    closes = text.count("closing connection")
    lat = sorted(latencies)
    q = statistics.quantiles(lat, n=100) if len(lat) >= 2 else [float("nan")] * 99
    print(f"frames processed     {stats.processed:,} in {elapsed:.0f} s "
          f"({stats.processed / elapsed:,.0f}/s; answered, or refused by closing the "
          f"connection), {stats.frames:,} sent, {stats.connections:,} connections")
    print(f"broker CPU           {broker_cpu:.0f} s: {broker_cpu / max(stats.processed, 1) * 1e6:.0f}"
          f" us per frame processed (CPU time: steady under load, unlike frames per second)")
    print(f"broker crashed       {'YES' if crashed else 'no'}")
    print(f"handler exceptions   {handler_failed} ('handler failed' lines), {tracebacks} tracebacks")
    print(f"closed by the broker {stats.closed_by_broker:,} connections ({closes:,} log lines); "
          f"{stats.timeouts:,} connections dropped after {IDLE:.0f} s without an answer")
    print(f"janitor              {stats.deleted_topics:,} fuzz-created topics deleted")
    print(f"probe client         {len(lat):,} requests, {probe_errors} errors; latency p50 "
          f"{q[49] * 1000:.1f} ms, p99 {q[98] * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms"
          if lat else "probe client         no requests")
    peak = max(r for _, r in rss)
    tenths = [rss[min(len(rss) - 1, len(rss) * i // 10)] for i in range(1, 10)] + [rss[-1]]
    print(f"broker RSS           start {rss[0][1] / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, "
          f"end {rss[-1][1] / 1024:.0f} MiB; over the run: "
          + " ".join(f"{r / 1024:.0f}" for _, r in tenths))
    print(f"load average (1 min) start {load[0]:.1f}, mean {statistics.mean(load):.1f}, "
          f"max {max(load):.1f} ({os.cpu_count()} CPUs)")
    print(f"broker log           {log.name}")


if __name__ == "__main__":
    main()
