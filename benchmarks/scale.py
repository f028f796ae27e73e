#!/usr/bin/env python3
"""How minibroker's cost grows with scale: topics in Metadata, idle-ish connections, partitions produced to.

    python benchmarks/scale.py [--quick] [--only metadata,connections,partitions] [--out DIR]

Every size runs against a fresh served single broker (`python -m minibroker serve --brokers 1
--port 0`) pinned to CPU 1 with taskset; this process runs on CPU 0. Three families, four sizes each
(each twice the previous), so a growth factor value(2x)/value(x) of 2.0 for a cost (0.5 for a rate)
means linear:

1. metadata: T topics x 10 partitions (T = 250, 500, 1000, 2000), created with CreateTopics
   (100 topics per request). Metadata for all topics (null topic list, highest version both sides
   know) from one connection: requests/s, response size, latency of the first (uncached) request
   and of repeated (cached) ones, broker CPU per request; creation time and broker RSS.
   Further uncached samples come from creating one 1-partition topic (bumps the cache generation)
   before a request, after the rate was measured.
2. connections: N connections (N = 250, 500, 1000, 2000) in one asyncio client, each sending one
   ApiVersions (or `--conn-request metadata`: Metadata for one topic) a second with a random phase,
   for --conn-duration s; broker CPU % while they are idle and under that load, latency p50/p99,
   broker RSS per connection.
3. partitions: P partitions (P = 2,500 .. 20,000, as P/100 topics x 100 partitions), one
   confluent-kafka producer (librdkafka, from $PERF_DIR's venv: this script re-executes under it)
   sending 100 B records round-robin over every partition for --produce-duration s, acks=1,
   linger.ms=5; msgs/s, broker CPU s per million messages, broker RSS.

RLIMIT_NOFILE's soft limit is raised to the hard limit here before the broker starts (the broker
inherits it). Writes results/scale.txt (tables) and results/scale.json (raw numbers) unless --quick
or --only (then pass --out DIR to keep them). `--quick`: the two smallest sizes, short windows.
No test asserts any of this; the machine is shared, so compare growth factors within one run.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import socket
import statistics
import struct
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {"metadata": [250, 500, 1000, 2000], "connections": [250, 500, 1000, 2000],
         "partitions": [2500, 5000, 10000, 20000]}
PARTITIONS_PER_TOPIC = {"metadata": 10, "partitions": 100}
CREATE_BATCH = 100          # topics per CreateTopics request
CLIENT_ID = "scale"


# ----------------------------------------------------------------------------- broker process
class Broker:
    """A served single broker pinned to CPU 1; always stopped in __exit__."""

    def __init__(self, python: str):
        self.python = python
        self.proc = None

    def __enter__(self):
        import psutil
        self.proc = subprocess.Popen(
            ["taskset", "-c", "1", self.python, "-m", "minibroker", "serve", "--brokers", "1",
             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("BOOTSTRAP "):
            raise RuntimeError(f"broker did not start: {line!r}")
        self.bootstrap = line.split()[1]
        host, port = self.bootstrap.split(",")[0].rsplit(":", 1)
        self.addr = (host, int(port))
        self.ps = psutil.Process(self.proc.pid)
        self.nofile = self.ps.rlimit(psutil.RLIMIT_NOFILE)
        time.sleep(0.3)         # let start-up garbage settle before the empty RSS is read
        return self

    def __exit__(self, *exc):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def rss_mb(self) -> float:
        return self.ps.memory_info().rss / 1e6

    def cpu_s(self) -> float:
        t = self.ps.cpu_times()
        return t.user + t.system


def client_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# ------------------------------------------------------------------------ blocking wire client
def recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise ConnectionError("broker closed the connection")
        got += k
    return buf


def roundtrip(sock: socket.socket, frame: bytes) -> bytearray:
    """Send one framed request, return the response frame's body (header included)."""
    sock.sendall(frame)
    n = struct.unpack(">i", recv_exact(sock, 4))[0]
    return recv_exact(sock, n)


def connect(addr) -> socket.socket:
    s = socket.create_connection(addr, timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def api_versions(sock: socket.socket) -> dict[int, tuple[int, int]]:
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse
    req = ApiVersionsRequest()
    req.with_header(correlation_id=1, client_id=CLIENT_ID)
    r = ApiVersionsResponse.decode(roundtrip(sock, req.encode(version=0, header=True, framed=True)),
                                   version=0, header=True)
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def frame(req, version: int, correlation_id: int = 1) -> bytes:
    req.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
    return bytes(req.encode(version=version, header=True, framed=True))


def create_topics(sock, versions, names: list[str], partitions: int) -> None:
    """CreateTopics, CREATE_BATCH topics per request; each request waits for leaders (timeout_ms)."""
    from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
    ver = min(versions[19][1], CreateTopicsRequest.max_version)
    T = CreateTopicsRequest.CreatableTopic
    for i in range(0, len(names), CREATE_BATCH):
        req = CreateTopicsRequest(topics=[T(name=n, num_partitions=partitions, replication_factor=1,
                                            assignments=[], configs=[])
                                          for n in names[i:i + CREATE_BATCH]],
                                  timeout_ms=60000, validate_only=False)
        resp = CreateTopicsResponse.decode(roundtrip(sock, frame(req, ver, i + 1)), version=ver,
                                           header=True)
        bad = [(t.name, t.error_code) for t in resp.topics if t.error_code]
        if bad:
            raise RuntimeError(f"CreateTopics failed: {bad[:3]}")


def metadata_all_frame(versions) -> tuple[bytearray, int]:
    from kafka.protocol.metadata import MetadataRequest
    ver = min(versions[3][1], MetadataRequest.max_version)
    kw = {"topics": None}
    if ver >= 4:
        kw["allow_auto_topic_creation"] = False
    return bytearray(frame(MetadataRequest(**kw), ver)), ver


def pct(vals: list[float], q: float) -> float | None:
    if not vals:
        return None
    s = sorted(vals)
    return s[min(len(s) - 1, int(len(s) * q / 100))]


# ------------------------------------------------------------------------------- 1. metadata
def run_metadata(a, topics: int) -> dict:
    from kafka.protocol.metadata import MetadataResponse
    per = PARTITIONS_PER_TOPIC["metadata"]
    out: dict = {"topics": topics, "partitions": topics * per}
    with Broker(a.python) as b:
        out["rss_empty_MB"] = round(b.rss_mb(), 1)
        sock = connect(b.addr)
        versions = api_versions(sock)
        names = [f"md-{i:05d}" for i in range(topics)]
        c0, t0 = b.cpu_s(), time.perf_counter()
        create_topics(sock, versions, names, per)
        out["create_s"] = round(time.perf_counter() - t0, 3)
        out["create_broker_cpu_s"] = round(b.cpu_s() - c0, 3)
        out["rss_created_MB"] = round(b.rss_mb(), 1)

        req, ver = metadata_all_frame(versions)
        out["metadata_version"] = ver
        cid = 100
        uncached = []

        def one() -> tuple[float, bytearray]:
            nonlocal cid
            cid += 1
            struct.pack_into(">i", req, 8, cid)     # correlation id: after size, key, version
            ts = time.perf_counter()
            body = roundtrip(sock, req)
            return time.perf_counter() - ts, body

        lat, body = one()
        uncached.append(lat)
        out["response_bytes"] = len(body) + 4
        resp = MetadataResponse.decode(body, version=ver, header=True)
        got = sum(len(t.partitions) for t in resp.topics)
        if len(resp.topics) != topics or got != topics * per:
            raise RuntimeError(f"Metadata shows {len(resp.topics)} topics / {got} partitions")

        lats = []
        c0, t0 = b.cpu_s(), time.perf_counter()
        t_end = t0 + a.md_duration
        while True:
            lat, _ = one()
            lats.append(lat)
            if time.perf_counter() >= t_end or len(lats) >= 200000:
                break
        wall = time.perf_counter() - t0
        bcpu = b.cpu_s() - c0
        out["req_per_s"] = round(len(lats) / wall, 1)
        out["cached_p50_ms"] = round(pct(lats, 50) * 1e3, 3)
        out["cached_p99_ms"] = round(pct(lats, 99) * 1e3, 3)
        out["broker_cpu_pct"] = round(100 * bcpu / wall, 1)
        out["broker_cpu_us_per_req"] = round(1e6 * bcpu / len(lats), 1)

        # More uncached samples: each new topic bumps the cache generation (T+1, T+2, ... topics).
        for k in range(a.md_uncached_extra):
            create_topics(sock, versions, [f"md-bump-{k}"], 1)
            lat, _ = one()
            uncached.append(lat)
        out["uncached_first_ms"] = round(uncached[0] * 1e3, 2)
        out["uncached_samples_ms"] = [round(x * 1e3, 2) for x in uncached]
        out["uncached_median_ms"] = round(statistics.median(uncached) * 1e3, 2)
        out["rss_MB"] = round(b.rss_mb(), 1)
        sock.close()
    out["create_ms_per_topic"] = round(1e3 * out["create_s"] / topics, 3)
    out["rss_kB_per_partition"] = round(1e3 * (out["rss_MB"] - out["rss_empty_MB"]) / out["partitions"], 2)
    out["cached_ns_per_partition"] = round(1e6 * out["cached_p50_ms"] / out["partitions"], 1)
    out["uncached_us_per_partition"] = round(1e3 * out["uncached_median_ms"] / out["partitions"], 2)
    return out


# ---------------------------------------------------------------------------- 2. connections
class _Conn(asyncio.Protocol):
    """One connection, strictly one request in flight."""

    def __init__(self):
        self.buf = bytearray()
        self.waiter: asyncio.Future | None = None

    def connection_made(self, transport):
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data):
        self.buf += data
        if len(self.buf) >= 4:
            n = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) >= 4 + n:
                body = bytes(self.buf[4:4 + n])
                del self.buf[:4 + n]
                if self.waiter is not None and not self.waiter.done():
                    self.waiter.set_result(body)

    def connection_lost(self, exc):
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError(f"connection lost: {exc}"))


async def _open(addr, n: int) -> list[_Conn]:
    loop = asyncio.get_running_loop()
    conns: list[_Conn] = []
    # In groups of 100 so the broker's listen backlog never overflows (SYN retries cost 1 s each).
    for i in range(0, n, 100):
        got = await asyncio.gather(*(loop.create_connection(_Conn, *addr)
                                     for _ in range(min(100, n - i))))
        conns += [p for _, p in got]
    return conns


async def _paced(conn: _Conn, template: bytes, start: float, phase: float, end: float,
                 lats: list[float], errors: list[str]) -> None:
    loop = asyncio.get_running_loop()
    buf = bytearray(template)
    k = 0
    try:
        while True:
            due = start + phase + k
            if due >= end:
                break
            await asyncio.sleep(max(0.0, due - loop.time()))
            k += 1
            struct.pack_into(">i", buf, 8, k)
            conn.waiter = loop.create_future()
            ts = time.perf_counter()
            conn.transport.write(bytes(buf))
            body = await asyncio.wait_for(conn.waiter, 10)
            lats.append(time.perf_counter() - ts)
            if int.from_bytes(body[:4], "big", signed=True) != k:
                errors.append("correlation id mismatch")
                break
    except Exception as e:  # noqa: BLE001 — counted and reported, the run goes on
        errors.append(f"{type(e).__name__}: {e}")


def conn_request_frame(a, sock, versions) -> tuple[bytes, str]:
    from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
    if a.conn_request == "metadata":
        create_topics(sock, versions, ["conn-topic"], 1)
        ver = min(versions[3][1], MetadataRequest.max_version)
        kw = {"topics": [MetadataRequest.MetadataRequestTopic(name="conn-topic")]}
        if ver >= 4:
            kw["allow_auto_topic_creation"] = False
        return frame(MetadataRequest(**kw), ver), f"Metadata v{ver}, 1 topic"
    ver = min(versions[18][1], 3)
    req = ApiVersionsRequest(client_software_name=CLIENT_ID, client_software_version="1") \
        if ver >= 3 else ApiVersionsRequest()
    return frame(req, ver), f"ApiVersions v{ver}"


def run_connections(a, n: int) -> dict:
    out: dict = {"connections": n}
    with Broker(a.python) as b:
        out["broker_nofile"] = list(b.nofile)
        sock = connect(b.addr)
        versions = api_versions(sock)
        template, out["request"] = conn_request_frame(a, sock, versions)
        sock.close()
        time.sleep(0.2)
        out["rss_empty_MB"] = round(b.rss_mb(), 1)

        async def main():
            loop = asyncio.get_running_loop()
            t0 = time.perf_counter()
            conns = await _open(b.addr, n)
            out["connect_s"] = round(time.perf_counter() - t0, 3)
            try:
                await asyncio.sleep(0.3)
                out["rss_connected_MB"] = round(b.rss_mb(), 1)
                # Idle: any per-connection timer or poll shows up as CPU here.
                c0, t0 = b.cpu_s(), time.perf_counter()
                await asyncio.sleep(a.idle_duration)
                out["idle_broker_cpu_pct"] = round(100 * (b.cpu_s() - c0) / (time.perf_counter() - t0), 2)
                lats: list[float] = []
                errors: list[str] = []
                rnd = random.Random(n)
                start = loop.time() + 0.05
                end = start + a.conn_duration
                c0, cc0, t0 = b.cpu_s(), client_cpu_s(), time.perf_counter()
                await asyncio.gather(*(_paced(c, template, start, rnd.random(), end, lats, errors)
                                       for c in conns))
                wall = time.perf_counter() - t0
                bcpu = b.cpu_s() - c0
                out["load_s"] = round(wall, 2)
                out["requests"] = len(lats)
                out["req_per_s"] = round(len(lats) / wall, 1)
                out["errors"] = len(errors)
                if errors:
                    out["first_error"] = errors[0]
                out["broker_cpu_pct"] = round(100 * bcpu / wall, 2)
                out["broker_cpu_us_per_req"] = round(1e6 * bcpu / max(1, len(lats)), 1)
                out["client_cpu_pct"] = round(100 * (client_cpu_s() - cc0) / wall, 1)
                out["p50_ms"] = round(pct(lats, 50) * 1e3, 3)
                out["p99_ms"] = round(pct(lats, 99) * 1e3, 3)
                out["max_ms"] = round(max(lats) * 1e3, 3)
                out["rss_MB"] = round(b.rss_mb(), 1)
            finally:
                for c in conns:
                    c.transport.close()
                await asyncio.sleep(0.1)

        asyncio.run(main())
    out["rss_kB_per_conn_idle"] = round(1e3 * (out["rss_connected_MB"] - out["rss_empty_MB"]) / n, 2)
    out["rss_kB_per_conn"] = round(1e3 * (out["rss_MB"] - out["rss_empty_MB"]) / n, 2)
    return out


# ----------------------------------------------------------------------------- 3. partitions
def run_partitions(a, partitions: int) -> dict:
    import confluent_kafka
    from confluent_kafka import Producer
    per = PARTITIONS_PER_TOPIC["partitions"]
    ntopics = max(1, partitions // per)
    out: dict = {"partitions": ntopics * per, "topics": ntopics,
                 "client": f"confluent-kafka {confluent_kafka.__version__} / librdkafka "
                           f"{confluent_kafka.libversion()[0]}"}
    with Broker(a.python) as b:
        out["rss_empty_MB"] = round(b.rss_mb(), 1)
        sock = connect(b.addr)
        versions = api_versions(sock)
        names = [f"rr-{i:04d}" for i in range(ntopics)]
        c0, t0 = b.cpu_s(), time.perf_counter()
        create_topics(sock, versions, names, per)
        out["create_s"] = round(time.perf_counter() - t0, 3)
        out["create_broker_cpu_s"] = round(b.cpu_s() - c0, 3)
        sock.close()
        out["rss_created_MB"] = round(b.rss_mb(), 1)

        errs: list[str] = []

        def cb(err, msg):
            if err is not None:
                errs.append(str(err))

        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 5,
                      "batch.size": 1000000, "compression.type": "none",
                      "queue.buffering.max.messages": 1000000,
                      "queue.buffering.max.kbytes": 1048576, "message.timeout.ms": 60000,
                      "delivery.report.only.error": True, "on_delivery": cb, "log_level": 3})
        value = os.urandom(100)
        # One produce_batch call per topic (each record names its partition): the Python loop
        # around produce() would otherwise be the limit, not the broker.
        batch = [{"value": value, "partition": i} for i in range(per)]
        pb, poll = p.produce_batch, p.poll

        def one_round() -> tuple[int, int]:
            sent = full = 0
            for t in names:
                k = 0
                while k < per:
                    k += pb(t, batch if k == 0 else batch[k:])
                    if k < per:
                        full += 1
                        poll(0.001)
                sent += per
                poll(0)
            return sent, full

        # Warm-up, not counted: metadata for every topic and one record in every partition.
        t0 = time.perf_counter()
        one_round()
        left = p.flush(60)
        out["warmup_s"] = round(time.perf_counter() - t0, 2)
        if left or errs:
            raise RuntimeError(f"warm-up: {left} unflushed, errors {errs[:3]}")

        sent = full = 0
        c0, cc0, t0 = b.cpu_s(), client_cpu_s(), time.perf_counter()
        t_end = t0 + a.produce_duration
        while time.perf_counter() < t_end and sent < a.max_msgs:
            n, f = one_round()
            sent, full = sent + n, full + f
        left = p.flush(60)
        wall = time.perf_counter() - t0
        bcpu = b.cpu_s() - c0
        p.close()       # librdkafka stops before the broker does (no reconnect noise)
        acked = sent - left - len(errs)
        out.update({"duration_s": round(wall, 2), "msgs": acked, "errors": len(errs),
                    "unflushed": left, "queue_full_waits": full,
                    "msgs_per_s": round(acked / wall),
                    "broker_cpu_pct": round(100 * bcpu / wall, 1),
                    "broker_cpu_s_per_M_msgs": round(bcpu / max(acked, 1) * 1e6, 2),
                    "client_cpu_pct": round(100 * (client_cpu_s() - cc0) / wall, 1),
                    "rss_MB": round(b.rss_mb(), 1)})
        if errs:
            out["first_error"] = errs[0]
    out["rss_kB_per_partition"] = round(1e3 * (out["rss_created_MB"] - out["rss_empty_MB"])
                                        / out["partitions"], 2)
    return out


# ---------------------------------------------------------------------------------- output
# (key, label, format); growth = value(2x)/value(x) between neighbouring sizes.
ROWS = {
    "metadata": ("T topics x 10 partitions", "topics", [
        ("create_s", "CreateTopics, s (100 topics/request)", "{:,.2f}"),
        ("create_ms_per_topic", "  per topic, ms", "{:,.2f}"),
        ("response_bytes", "Metadata(all) response, bytes", "{:,.0f}"),
        ("req_per_s", "Metadata(all) req/s, 1 conn (cached)", "{:,.1f}"),
        ("cached_p50_ms", "cached latency p50, ms", "{:,.3f}"),
        ("broker_cpu_us_per_req", "broker CPU per cached request, us", "{:,.0f}"),
        ("uncached_first_ms", "first (uncached) latency, ms", "{:,.1f}"),
        ("uncached_median_ms", "uncached latency median, ms", "{:,.1f}"),
        ("uncached_us_per_partition", "  per partition, us", "{:,.2f}"),
        ("rss_MB", "broker RSS, MB", "{:,.1f}"),
        ("rss_kB_per_partition", "  above empty, kB/partition", "{:,.2f}"),
    ]),
    "connections": ("N connections x 1 req/s", "connections", [
        ("connect_s", "open all connections, s", "{:,.2f}"),
        ("idle_broker_cpu_pct", "broker CPU % (connections idle)", "{:,.2f}"),
        ("req_per_s", "requests/s answered", "{:,.0f}"),
        ("broker_cpu_pct", "broker CPU % (1 req/s each)", "{:,.1f}"),
        ("broker_cpu_us_per_req", "broker CPU per request, us", "{:,.0f}"),
        ("p50_ms", "latency p50, ms", "{:,.3f}"),
        ("p99_ms", "latency p99, ms", "{:,.3f}"),
        ("rss_MB", "broker RSS, MB", "{:,.1f}"),
        ("rss_kB_per_conn", "  above empty, kB/connection", "{:,.1f}"),
        ("errors", "errors", "{:,.0f}"),
    ]),
    "partitions": ("P partitions, round-robin produce", "partitions", [
        ("create_s", "CreateTopics, s (P/100 topics x 100)", "{:,.2f}"),
        ("warmup_s", "warm-up: 1 record per partition, s", "{:,.2f}"),
        ("msgs_per_s", "msgs/s (100 B, acks=1)", "{:,.0f}"),
        ("broker_cpu_pct", "broker CPU %", "{:,.0f}"),
        ("broker_cpu_s_per_M_msgs", "broker CPU s per million msgs", "{:,.2f}"),
        ("client_cpu_pct", "client (producer) CPU %", "{:,.0f}"),
        ("rss_created_MB", "broker RSS, topics created, MB", "{:,.1f}"),
        ("rss_kB_per_partition", "  above empty, kB/partition", "{:,.2f}"),
        ("rss_MB", "broker RSS after producing, MB", "{:,.1f}"),
        ("errors", "errors", "{:,.0f}"),
    ]),
}


def growth(vals: list) -> list[float | None]:
    return [round(b / a, 2) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and a
            else None for a, b in zip(vals, vals[1:])]


def table(family: str, runs: list[dict]) -> list[str]:
    title, size_key, rows = ROWS[family]
    sizes = [r[size_key] for r in runs]
    head = f"{title:<40}" + "".join(f"{s:>11,}" for s in sizes) + "   | x per doubling"
    lines = [head, "-" * len(head)]
    for key, label, fmt in rows:
        vals = [r.get(key) for r in runs]
        cells = "".join(f"{fmt.format(v) if v is not None else '-':>11}" for v in vals)
        g = " ".join(f"{x:>5.2f}" if x is not None else "    -" for x in growth(vals))
        lines.append(f"{label:<40}{cells}   | {g}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="two smallest sizes, short windows")
    ap.add_argument("--only", default="metadata,connections,partitions")
    ap.add_argument("--out", help="directory for scale.txt/scale.json (default results/ on a full run)")
    ap.add_argument("--md-duration", type=float, default=3.0)
    ap.add_argument("--md-uncached-extra", type=int, default=4)
    ap.add_argument("--conn-duration", type=float, default=10.0)
    ap.add_argument("--idle-duration", type=float, default=2.0)
    ap.add_argument("--conn-request", choices=("apiversions", "metadata"), default="apiversions")
    ap.add_argument("--produce-duration", type=float, default=8.0)
    ap.add_argument("--max-msgs", type=int, default=8_000_000, help="bounds the broker's memory")
    ap.add_argument("--python", default=sys.executable, help="interpreter for the broker")
    a = ap.parse_args()
    families = [f for f in a.only.split(",") if f]
    if unknown := set(families) - set(SIZES):
        ap.error(f"unknown families {unknown}")
    if "partitions" in families:
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            perf = os.environ.get("PERF_DIR", "/tmp/minibroker-perf")
            venv = os.path.join(perf, "venv", "bin", "python")
            if not os.path.exists(venv):
                subprocess.run(["bash", os.path.join(os.path.dirname(REPO), "shared", "perf", "setup.sh")],
                               check=True)
            os.execv(venv, [venv, os.path.abspath(__file__), *sys.argv[1:], "--python", a.python])
    if a.quick:
        a.md_duration, a.md_uncached_extra = 1.0, 2
        a.conn_duration, a.idle_duration, a.produce_duration = 3.0, 1.0, 2.0
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:        # N connections need N fds here and in the broker (inherited)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.sched_setaffinity(0, {0})
    run = {"metadata": run_metadata, "connections": run_connections, "partitions": run_partitions}
    started = time.strftime("%Y-%m-%d %H:%M")
    t_all = time.perf_counter()
    results: dict = {}
    for fam in families:
        results[fam] = []
        for size in SIZES[fam][:2] if a.quick else SIZES[fam]:
            t0 = time.perf_counter()
            r = run[fam](a, size)
            r["wall_s"] = round(time.perf_counter() - t0, 1)
            results[fam].append(r)
            print(f"{fam} {size}: {json.dumps(r)}", file=sys.stderr, flush=True)
    lines = [f"# minibroker scale, {started}, {'--quick, ' if a.quick else ''}broker on CPU 1 "
             f"(served, 1 broker, uvloop), client on CPU 0; {os.cpu_count()}-core shared VM",
             "# growth = value(2x)/value(x): for a cost 2.00 is linear, for a rate 0.50 is linear"]
    for fam in families:
        lines += [""] + table(fam, results[fam])
    if "connections" in families:
        lines.append(f"(connections: {results['connections'][0]['request']} per connection per second "
                     f"for {a.conn_duration:g} s, random phase)")
    if "partitions" in families:
        lines.append(f"(partitions: {results['partitions'][0]['client']}, linger.ms=5, "
                     f"{a.produce_duration:g} s + flush)")
    lines.append(f"(total {time.perf_counter() - t_all:.0f} s)")
    text = "\n".join(lines)
    print(text)
    out_dir = a.out or (None if a.quick or a.only != ap.get_default("only")
                        else os.path.join(REPO, "benchmarks", "results"))
    if out_dir:
        doc = {"date": started, "quick": a.quick, "cpus": os.cpu_count(),
               "settings": {k: getattr(a, k) for k in ("md_duration", "md_uncached_extra",
                                                       "conn_duration", "idle_duration",
                                                       "conn_request", "produce_duration")},
               "results": results,
               "growth_per_doubling": {fam: {key: growth([r.get(key) for r in results[fam]])
                                             for key, _, _ in ROWS[fam][2]} for fam in families}}
        with open(os.path.join(out_dir, "scale.txt"), "w") as f:
            f.write(text + "\n")
        with open(os.path.join(out_dir, "scale.json"), "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        print(f"wrote {out_dir}/scale.txt, scale.json")


if __name__ == "__main__":
    main()
