"""The long mutation fuzz run (issue 25): mutated client requests against a real `minibroker serve`,
while a well-behaved client measures its latencies on connections of its own.

    nice -n 19 python3 benchmarks/fuzz_long.py --frames 1000000 --max-seconds 1800

Seeds are valid requests built with kafka-python's encoders (tests/fuzz/corpus.py: ApiVersions,
Metadata, Produce, Fetch, ListOffsets, the group APIs, CreateTopics, ...); each frame sent is one
of them with 1-4 mutations (bit flips, interesting bytes and int32s, cuts, duplicated or deleted
slices; half of the time past the request header, so that they reach the handlers), or, one time
in eight, a valid header of a random API and version with random bytes.
Several fuzzing connections each keep up to 32 frames unanswered (written 4 at a time) until the
broker closes the connection or answers nothing for 1 s (then the connection is dropped). The broker runs
in its own process (started here, same niceness); the probe client in another.

Prints: frames processed (answered, or refused by closing the connection; frames sent after a
refused one in the same write are never executed) and per second, broker crashes (the process ended), handler exceptions and
tracebacks in its log, connections the broker closed, the probe's p50/p99/max latency per
request, and the broker's RSS at start, its maximum, and at the end. Bounded by --frames and
--max-seconds. Loopback only.
"""
from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
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

from corpus import TOPIC, mutate, seeds  # noqa: E402

BATCH = 4
WINDOW = 32
IDLE = 1.0


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
            topic_id=None, name="probe")], allow_auto_topic_creation=True,
            include_topic_authorized_operations=False), 12)
        await asyncio.sleep(1)
        md = await conns[0].request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            topic_id=None, name="probe")], allow_auto_topic_creation=True,
            include_topic_authorized_operations=False), 12)
        leader = md.topics[0].partitions[0].leader_id
        by_id = {b.node_id: b for b in md.brokers}
        lconn = await KafkaClientConnection.connect(by_id[leader].host, by_id[leader].port,
                                                    client_id="probe")
        offset = 0
        while not stop.is_set():
            for req, version, conn in (
                    (ApiVersionsRequest(), 3, conns[0]),
                    (MetadataRequest(topics=None), 1, conns[-1]),
                    (produce_request("probe", 0, bytes(build_batch([(None, b"p" * 100, [])])),
                                     acks=1), 9, lconn),
                    (fetch_request("probe", 0, offset), 12, lconn)):
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
    def __init__(self) -> None:
        self.frames = 0             # sent
        self.processed = 0          # answered, or refused by closing the connection
        self.connections = 0
        self.closed_by_broker = 0
        self.timeouts = 0


def _frame(corpus, headers, rng) -> bytes:
    if rng.random() < 0.125:
        _, _, head = rng.choice(headers)
        body = head + rng.randbytes(rng.randrange(64))
    elif rng.random() < 0.5:
        body = mutate(rng.choice(corpus)[2], rng)
    else:           # the header kept: the mutations reach the handlers
        seed = rng.choice(corpus)[2]
        body = seed[:14] + mutate(seed[14:], rng)
    return struct.pack(">i", len(body)) + body


async def fuzz_connection(hosts, corpus, headers, rng, stats: Stats, limit: int, deadline: float):
    """One connection at a time: a writer keeps up to WINDOW frames unanswered (in batches of
    BATCH), a reader counts responses; the connection ends when the broker closes it (the frame
    that closed it counts as processed, those after it were never executed) or nothing is
    answered for IDLE seconds (frames the broker holds: long-poll Fetch, JoinGroup, acks=0)."""
    while stats.processed < limit and time.monotonic() < deadline:
        host, port = rng.choice(hosts)
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        stats.connections += 1
        sent = answered = 0
        progress = asyncio.Event()
        done = False

        async def read():
            nonlocal answered, done
            try:
                while True:
                    size = struct.unpack(">i", await reader.readexactly(4))[0]
                    await reader.readexactly(size)
                    answered += 1
                    stats.processed += 1
                    progress.set()
            except (asyncio.IncompleteReadError, OSError):
                stats.closed_by_broker += 1
                stats.processed += 1
            finally:
                done = True
                progress.set()

        task = asyncio.ensure_future(read())
        try:
            while not done and stats.processed < limit and time.monotonic() < deadline:
                if sent - answered < WINDOW:
                    writer.write(b"".join(_frame(corpus, headers, rng) for _ in range(BATCH)))
                    sent += BATCH
                    stats.frames += BATCH
                    await writer.drain()
                    continue
                progress.clear()
                try:
                    await asyncio.wait_for(progress.wait(), IDLE)
                except asyncio.TimeoutError:
                    stats.timeouts += 1
                    break
        except OSError:
            pass
        finally:
            writer.close()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def fuzz(bootstrap: str, limit: int, max_seconds: float, seed: int, parallel: int) -> Stats:
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
                            + (b"\x00" if flexible else b"")))
    stats = Stats()
    deadline = time.monotonic() + max_seconds
    await asyncio.gather(*(fuzz_connection(hosts, corpus, headers, random.Random(seed + i), stats,
                                           limit, deadline) for i in range(parallel)))
    return stats


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1_000_000,
                    help="stop after this many frames answered or refused")
    ap.add_argument("--max-seconds", type=float, default=1800)
    ap.add_argument("--parallel", type=int, default=8, help="fuzzing connections at a time")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--brokers", type=int, default=3)
    args = ap.parse_args()

    log = tempfile.NamedTemporaryFile(prefix="fuzz_long_broker_", suffix=".log", delete=False)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    broker = subprocess.Popen(
        [sys.executable, "-m", "minibroker.cli", "serve", "--brokers", str(args.brokers),
         "--port", "0", "--log-level", "WARNING"],
        stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=str(ROOT))
    bootstrap = None
    for line in broker.stdout:
        if line.startswith("BOOTSTRAP "):
            bootstrap = line.split()[1].strip()
            break
    if bootstrap is None:
        sys.exit("the broker did not start; see " + log.name)
    time.sleep(1)
    rss = [rss_kib(broker.pid)]
    stop = multiprocessing.Event()
    out = multiprocessing.Queue()
    probe = multiprocessing.Process(target=probe_main, args=(bootstrap, stop, out))
    probe.start()

    async def run():
        async def watch():
            while broker.poll() is None:
                rss.append(rss_kib(broker.pid))
                await asyncio.sleep(1)
        w = asyncio.ensure_future(watch())
        t0 = time.monotonic()
        stats = await fuzz(bootstrap, args.frames, args.max_seconds, args.seed, args.parallel)
        w.cancel()
        return stats, time.monotonic() - t0

    stats, elapsed = asyncio.run(run())
    stop.set()
    latencies, probe_errors = out.get(timeout=60)
    probe.join(10)
    crashed = broker.poll() is not None
    rss.append(rss_kib(broker.pid))
    if not crashed:
        broker.terminate()
        try:
            broker.wait(30)
        except subprocess.TimeoutExpired:
            print("the broker did not stop within 30 s of SIGTERM: killed")
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
    print(f"broker crashed       {'YES' if crashed else 'no'}")
    print(f"handler exceptions   {handler_failed} ('handler failed' lines), {tracebacks} tracebacks")
    print(f"closed by the broker {stats.closed_by_broker:,} connections ({closes:,} log lines); "
          f"{stats.timeouts:,} connections dropped after 1 s without an answer")
    print(f"probe client         {len(lat):,} requests, {probe_errors} errors; latency p50 "
          f"{q[49] * 1000:.1f} ms, p99 {q[98] * 1000:.1f} ms, max {lat[-1] * 1000:.1f} ms"
          if lat else "probe client         no requests")
    print(f"broker RSS           start {rss[0] / 1024:.0f} MiB, max {max(rss) / 1024:.0f} MiB, "
          f"end {rss[-1] / 1024:.0f} MiB")
    print(f"broker log           {log.name}")


if __name__ == "__main__":
    main()
