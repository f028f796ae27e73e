#!/usr/bin/env python3
"""minibroker side by side with the librdkafka mock (C) and Tansu (Rust), in one run.

    python benchmarks/run.py [--quick] [--repeat 3] [--duration 10] [--only mbreadme,mb1,mb3,mb3s,mb3p,mock,tansu]
                             [--log-memory-max-bytes N] [--max-bytes 2e10]

1. `bash ../shared/perf/setup.sh` if $PERF_DIR (default /tmp/minibroker-perf) is not ready.
2. ../shared/perf/anchor.py, once per broker per round (a fresh broker each time, pinned to CPU 1 and
   load.py to CPU 0): first the README's command exactly (`python -m minibroker serve --port 0`:
   3 brokers, every default, topics RF 1 as load.py creates them), then the tuned variants beside
   it, minibroker 1 broker (topics RF 1), 3 brokers (topics RF 3, min.insync.replicas 2) in one
   process (linked by memory pipes, serve's default; `mb3s`: by loopback TCP) and with --processes
   (one per broker, TCP), the librdkafka mock and Tansu. Round r runs every broker before round r+1 starts, in reverse order on
   odd rounds, so the host's drift over the run reaches every broker alike; medians over the rounds
   and a table of minibroker/peer and minibroker/best-peer ratios per scenario.
3. In-process extras: cluster start-up to the first ApiVersions answer (median of 20), broker CPU
   seconds per GB (from anchor's broker_cpu_s), RSS of a served broker holding 10,000 partitions.
4. Writes benchmarks/results/side_by_side.json and benchmarks/results/latest.txt, printing every
   regression > 10% against the side_by_side.json it replaces (git keeps the older ones).

--max-bytes: load.py's per-scenario produce bound, the same for every broker. load.py's own default
(1.5e9) ends a 10 KiB scenario in under a second, which measures start-up transients; 2e10 lets each
scenario run its full --duration.
--quick: 3 s per scenario, 1 repeat, fewer start-up samples (a smoke run; numbers are noisy).
"""
from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import shlex
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERF = os.path.join(os.path.dirname(REPO), "shared", "perf")
ANCHOR = os.path.join(PERF, "anchor.py")
RESULTS = os.path.join(REPO, "benchmarks", "results")
RESULT_FILE = os.path.join(RESULTS, "side_by_side.json")

# (scenario, metric, higher_is_better)
ROWS = [
    ("produce_100B_acks1", "msgs_per_s", True), ("produce_100B_acks1", "MB_per_s", True),
    ("produce_100B_acksall", "msgs_per_s", True), ("produce_100B_acksall", "MB_per_s", True),
    ("produce_10KiB_acks1", "msgs_per_s", True), ("produce_10KiB_acks1", "MB_per_s", True),
    ("produce_10KiB_acksall", "msgs_per_s", True), ("produce_10KiB_acksall", "MB_per_s", True),
    ("consume_100B", "msgs_per_s", True), ("consume_100B", "MB_per_s", True),
    ("consume_10KiB", "msgs_per_s", True), ("consume_10KiB", "MB_per_s", True),
    ("latency_100B_acks_all", "p50_ms", False), ("latency_100B_acks_all", "p99_ms", False),
    ("apiversions_c1", "req_per_s", True), ("apiversions_c8", "req_per_s", True),
    ("apiversions_c16", "req_per_s", True),
    ("metadata_c1", "req_per_s", True), ("metadata_c8", "req_per_s", True),
    ("metadata_c16", "req_per_s", True),
]
PEERS = ("mock", "tansu")
MB = ("mbreadme", "mb1", "mb3", "mb3s", "mb3p")  # the README's command first, then the tuned variants
# load.py's small-request connection counts: issue 6's targets are set at 1 and 8, and its
# figures asked for at 1 and 16
CONNS = "1,8,16"
# scenarios whose broker CPU per GB moved is printed and checked run to run
CPU_PER_GB = ("produce_100B_acks1", "produce_100B_acksall", "produce_10KiB_acks1",
              "produce_10KiB_acksall", "consume_100B", "consume_10KiB")


def perf_dir() -> str:
    return os.environ.get("PERF_DIR", "/tmp/minibroker-perf")


def ensure_setup() -> str:
    d = perf_dir()
    py = os.path.join(d, "venv", "bin", "python")
    ok = os.path.exists(os.path.join(d, "tansu", "tansu")) and os.path.exists(py) and subprocess.run(
        [py, "-c", "import confluent_kafka, kafka, psutil"], capture_output=True).returncode == 0
    if not ok:
        print(f"# setting up peers in {d} (bash ../shared/perf/setup.sh)", file=sys.stderr, flush=True)
        subprocess.run(["bash", os.path.join(PERF, "setup.sh")], check=True,
                       env={**os.environ, "PERF_DIR": d})
    return py


def broker_commands(venv_py: str, log_memory_max_bytes: int) -> dict[str, tuple[str, dict]]:
    """label → (shell command printing BOOTSTRAP, extra env for load.py)."""
    readme = f"exec {shlex.quote(sys.executable)} -m minibroker serve --port 0"
    mb = readme
    if log_memory_max_bytes is not None:
        # serve's own default is sized from the machine (1 GiB in all here); this replaces it
        # for the tuned variants only, never for the README's command.
        mb += f" --override log.memory.max.bytes={log_memory_max_bytes}"
    # auto-create is the fallback for brokers without CreateTopics (load.py tries CreateTopics first).
    auto = "--override auto.create.topics.enable=true --override num.partitions=4"
    return {
        # The README's command, unchanged: 3 brokers, defaults; topics as load.py creates them.
        "mbreadme": (f"cd {shlex.quote(REPO)} && {readme}", {"MB_PERF_RF": "1"}),
        "mb1": (f"cd {shlex.quote(REPO)} && {mb} --brokers 1 {auto} --override default.replication.factor=1",
                {"MB_PERF_RF": "1"}),
        "mb3": (f"cd {shlex.quote(REPO)} && {mb} --brokers 3 {auto} --override default.replication.factor=3"
                " --override min.insync.replicas=2", {"MB_PERF_RF": "3"}),
        # mb3 with its brokers' links on loopback TCP rather than memory pipes (in one process, the
        # default), to show what the pipes change.
        "mb3s": (f"cd {shlex.quote(REPO)} && {mb} --brokers 3 {auto} --override default.replication.factor=3"
                 " --override min.insync.replicas=2 --override minibroker.inter.broker.sockets=true",
                 {"MB_PERF_RF": "3"}),
        # mb3 with each broker in a process of its own (serve --processes). anchor.py pins the
        # broker command to CPU 1 and the processes inherit it: on this 2-core machine the row shows
        # what the process boundary costs, not what more cores give (docs/performance.md).
        "mb3p": (f"cd {shlex.quote(REPO)} && {mb} --processes --brokers 3 {auto}"
                 " --override default.replication.factor=3 --override min.insync.replicas=2",
                 {"MB_PERF_RF": "3"}),
        "mock": (f"exec {shlex.quote(venv_py)} {shlex.quote(os.path.join(PERF, 'librdkafka_mock.py'))}"
                 " --brokers 1", {"MB_PERF_RF": "1"}),
        "tansu": (f"PORT=$({shlex.quote(venv_py)} -c 'import socket; s=socket.socket(); s.bind((\"127.0.0.1\", 0));"
                  f" print(s.getsockname()[1])'); exec bash {shlex.quote(os.path.join(PERF, 'tansu_run.sh'))} $PORT",
                  {"MB_PERF_RF": "1"}),
    }


def _anchor_module():
    """../shared/perf/anchor.py as a module: its `flatten` turns a load.py result into the
    (scenario, metric) values it takes medians of, and the rounds below take them the same way."""
    spec = importlib.util.spec_from_file_location("perf_anchor", ANCHOR)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_rounds(labels: list[str], cmds: dict, venv_py: str, a, tmp: str) -> dict[str, dict]:
    """`a.repeat` rounds, each running every broker once, then medians per broker over the rounds.

    The host's speed drifts over a run (the 14:26 run of 2026-11-23 was slowest while mb1 ran, which
    had all its repeats in one block): interleaved, a slow stretch costs every broker a run, not one
    broker its median. Odd rounds go in reverse order so no broker always runs first or last."""
    flatten = _anchor_module().flatten
    runs: dict[str, list] = {label: [] for label in labels}
    by_round: dict[str, list[dict]] = {label: [] for label in labels}
    for r in range(a.repeat):
        for label in (labels if r % 2 == 0 else labels[::-1]):
            cmd, env = cmds[label]
            d = os.path.join(tmp, f"round{r}")
            os.makedirs(d, exist_ok=True)
            per_run = run_anchor(label, cmd, env, venv_py, a, d).get("per_run", [])
            runs[label] += per_run
            by_round[label].append(flatten(per_run[0]) if per_run else {})
    out = {}
    for label, per_run in runs.items():
        flat = [flatten(x) for x in per_run]
        med: dict = {}
        for key in sorted(set().union(*flat)) if flat else []:
            med.setdefault(key[0], {})[key[1]] = statistics.median(f[key] for f in flat if key in f)
        out[label] = {"label": label, "runs": len(per_run), "duration_s": a.duration, "median": med,
                      "rounds": {f"{s}.{m}": [f.get((s, m)) for f in by_round[label]] for s, m, _ in ROWS}}
    return out


def run_anchor(label: str, cmd: str, env_extra: dict, venv_py: str, a, tmp: str) -> dict:
    wrapper = os.path.join(tmp, "python_rf.sh")     # anchor runs `--python load.py ...`
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec {shlex.quote(venv_py)} "
                f"{shlex.quote(os.path.join(REPO, 'benchmarks', '_load_rf.py'))} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    out = os.path.join(tmp, f"anchor-{label}.json")
    argv = [venv_py, ANCHOR, "--label", label, "--peer-cmd", cmd, "--repeat", "1",
            "--duration", str(a.duration), "--out", out, "--python", wrapper,
            "--", "--max-bytes", f"{a.max_bytes:g}", "--conns", CONNS]
    print(f"# {label}: {cmd}", file=sys.stderr, flush=True)
    r = subprocess.run(argv, env={**os.environ, **env_extra, "PERF_DIR": perf_dir()},
                       stdout=subprocess.PIPE, text=True)
    sys.stderr.write(r.stdout)
    if not os.path.exists(out):
        return {"label": label, "runs": 0, "median": {}, "error": f"anchor rc={r.returncode}"}
    with open(out) as f:
        return json.load(f)


# ------------------------------------------------------------------------------- in-process extras

def _api_versions_frame() -> bytes:
    body = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
    return struct.pack(">i", len(body)) + body


async def _startup_once(brokers: int) -> float:
    from minibroker.cluster import Cluster
    from minibroker.config import ClusterConfig
    t0 = time.perf_counter()
    cluster = Cluster(ClusterConfig(brokers=brokers, port=0))
    await cluster.start()
    host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(_api_versions_frame())
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    await reader.readexactly(size)
    elapsed = time.perf_counter() - t0
    writer.close()
    await cluster.stop()
    return elapsed


def startup_ms(brokers: int, samples: int) -> float:
    import logging
    logging.getLogger("minibroker").setLevel(logging.ERROR)     # "closing connection" on each stop
    async def main():
        return [await _startup_once(brokers) for _ in range(samples)]
    return round(statistics.median(asyncio.run(main())) * 1000, 2)


def _request(sock: socket.socket, api_key: int, version: int, body: bytes, flexible: bool) -> bytes:
    hdr = struct.pack(">hhih", api_key, version, 7, 5) + b"bench" + (b"\x00" if flexible else b"")
    sock.sendall(struct.pack(">i", len(hdr) + len(body)) + hdr + body)
    size = struct.unpack(">i", _recvn(sock, 4))[0]
    return _recvn(sock, size)


def _recvn(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def _rss_bytes(pid: int) -> int:
    """VmRSS of `pid` (Linux /proc; the system Python runs this part, without psutil)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def rss_10k_partitions(topics: int = 100, per_topic: int = 100) -> dict:
    """Serve one broker, auto-create topics×per_topic partitions via Metadata, return RSS in MB."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse
    p = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "1", "--port", "0",
                          "--override", "auto.create.topics.enable=true",
                          "--override", f"num.partitions={per_topic}"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO)
    try:
        bs = p.stdout.readline().decode().split()[1]
        host, port = bs.split(",")[0].rsplit(":", 1)
        time.sleep(0.5)
        rss0 = _rss_bytes(p.pid)
        names = [f"rss-{i:03d}" for i in range(topics)]
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names],
                              allow_auto_topic_creation=True)
        body = bytes(req.encode(version=4))
        t0 = time.perf_counter()
        with socket.create_connection((host, int(port))) as s:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                resp = MetadataResponse.decode(_request(s, 3, 4, body, False)[4:], version=4)
                n = sum(len(t.partitions) for t in resp.topics if t.error_code == 0
                        and all(pp.leader_id >= 0 for pp in t.partitions))
                if n >= topics * per_topic:
                    break
                time.sleep(0.2)
        created_s = time.perf_counter() - t0
        time.sleep(1)
        rss1 = _rss_bytes(p.pid)
        return {"partitions": n, "rss_MB": round(rss1 / 1e6, 1), "rss_empty_MB": round(rss0 / 1e6, 1),
                "kB_per_partition": round((rss1 - rss0) / 1e3 / max(n, 1), 2),
                "create_s": round(created_s, 2)}
    finally:
        p.terminate()
        p.wait(10)


def cpu_per_gb(summary: dict) -> dict:
    out = {}
    for scen in CPU_PER_GB:
        m = summary.get("median", {}).get(scen, {})
        if m.get("broker_cpu_s") is not None and m.get("bytes"):
            out[scen] = round(m["broker_cpu_s"] / (m["bytes"] / 1e9), 2)
    return out


# ------------------------------------------------------------------------------------- reporting

def _fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float) and abs(v) < 100:
        return f"{v:.2f}"
    return f"{v:,.0f}"


def table(results: dict) -> list[str]:
    med = {k: v.get("median", {}) for k, v in results["brokers"].items()}
    lines = [f"{'scenario':22} {'metric':10} {'mbreadme':>10} {'mb1':>10} {'mb3(rf3)':>10} {'mb3s(rf3)':>10}"
             f" {'mb3p(rf3)':>10} {'mock':>10} {'tansu':>10} {'readme/best':>11} {'mb1/best':>9}"
             f" {'mb3/best':>9} {'mb3/mb1':>9} {'mb3s/mb3':>9} {'mb3p/mb3':>9}"]
    ratios = {}
    for scen, metric, higher in ROWS:
        vals = {k: med.get(k, {}).get(scen, {}).get(metric) for k in MB + PEERS}
        peers = [vals[p] for p in PEERS if vals[p]]
        best = (max(peers) if higher else min(peers)) if peers else None

        def r(a, b):
            return round(a / b, 3) if a is not None and b else None
        row = {"readme/best": r(vals["mbreadme"], best), "mb1/best": r(vals["mb1"], best),
               "mb3/best": r(vals["mb3"], best), "mb3/mb1": r(vals["mb3"], vals["mb1"]),
               "mb3s/mb3": r(vals["mb3s"], vals["mb3"]), "mb3p/mb3": r(vals["mb3p"], vals["mb3"])}
        ratios[f"{scen}.{metric}"] = row
        lines.append(f"{scen:22} {metric:10} " + " ".join(f"{_fmt(vals[k]):>10}" for k in MB + PEERS)
                     + f" {_fmt(row['readme/best']):>11} "
                     + " ".join(f"{_fmt(row[k]):>9}"
                                for k in ("mb1/best", "mb3/best", "mb3/mb1", "mb3s/mb3", "mb3p/mb3")))
    lines.append("(mbreadme: `python -m minibroker serve --port 0`, nothing else; ratios are minibroker/peer; for p50/p99 latency lower is better, so < 1 favours minibroker;"
                 " best = the better peer per row; peers run RF 1)")
    results["ratios"] = ratios
    lines += round_lines(results)
    lines += floor_lines(results)
    ex = results["extras"]
    lines.append("")
    if ex["startup_samples"]:       # --no-extras measured none
        lines.append(f"start-up to first ApiVersions answer, in-process, median of {ex['startup_samples']}: "
                     f"1 broker {ex.get('startup_ms_1')} ms, 3 brokers {ex.get('startup_ms_3')} ms")
    for k, v in results["brokers"].items():
        c = cpu_per_gb(v)
        if c:
            lines.append(f"broker CPU s/GB {k:6}: " + ", ".join(f"{s} {x}" for s, x in c.items()))
    if ex.get("rss"):
        r = ex["rss"]
        lines.append(f"RSS of a served broker with {r['partitions']:,} partitions: {r['rss_MB']} MB "
                     f"(empty {r['rss_empty_MB']} MB, {r['kB_per_partition']} kB/partition; "
                     f"created in {r['create_s']} s)")
    return lines


def round_lines(results: dict) -> list[str]:
    """Each throughput row round by round: the spread, and in how many rounds mb1 was at or above
    the best peer of that round. A round runs every broker within minutes, so this pairing tells
    a lead that holds round by round from a median ratio that the host's drift put near 1.0."""
    lines = ["per round, MB/s (min-max over the rounds; mb1 >= the round's best peer in k of n):"]
    for scen, metric, _ in ROWS:
        if metric != "MB_per_s":
            continue
        rounds = {k: v.get("rounds", {}).get(f"{scen}.{metric}") or [] for k, v in results["brokers"].items()}
        spread = [f"{k} {_fmt(min(x))}-{_fmt(max(x))}" for k in MB + PEERS
                  if (x := [v for v in rounds.get(k, []) if v is not None])]
        lead = n = 0
        for i, v in enumerate(rounds.get("mb1", [])):
            peers = [rounds[p][i] for p in PEERS if i < len(rounds.get(p, [])) and rounds[p][i] is not None]
            if v is not None and peers:
                n += 1
                lead += v >= max(peers)
        if spread:
            lines.append(f"  {scen:22} " + "  ".join(spread) + (f"  (mb1 ahead in {lead} of {n})" if n else ""))
    return lines


def floor_lines(results: dict) -> list[str]:
    """Each broker's median against the best of the other brokers (mb1 and the peers), with the
    load client's CPU: where the client is saturated against all of them, even a peer lands below
    1.0 by the host's spread alone, and that is the row's noise floor."""
    labels = ("mbreadme", "mb1") + PEERS
    lines = ["each broker / the best of the others, median MB/s (load.py's CPU against it):"]
    for scen, metric, _ in ROWS:
        if metric != "MB_per_s":
            continue
        med = {k: results["brokers"].get(k, {}).get("median", {}).get(scen, {}) for k in labels}
        vals = {k: m.get(metric) for k, m in med.items()}
        if sum(1 for v in vals.values() if v) < 2:
            continue
        cells = []
        for k in labels:
            others = [v for o, v in vals.items() if o != k and v]
            if vals[k] and others:
                cpu = med[k].get("client_cpu_pct")
                cells.append(f"{k} {vals[k] / max(others):.2f} ({cpu:.0f}%)" if cpu is not None
                             else f"{k} {vals[k] / max(others):.2f}")
        lines.append(f"  {scen:22} " + "  ".join(cells))
    return lines


def _metrics(results: dict) -> dict[str, tuple[float, bool]]:
    out = {}
    for label in MB:
        med = results.get("brokers", {}).get(label, {}).get("median", {})
        for scen, metric, higher in ROWS:
            v = med.get(scen, {}).get(metric)
            if v:
                out[f"{label}.{scen}.{metric}"] = (v, higher)
        for scen, v in cpu_per_gb(results.get("brokers", {}).get(label, {})).items():
            out[f"{label}.{scen}.broker_cpu_s_per_GB"] = (v, False)
    ex = results.get("extras", {})
    for k in ("startup_ms_1", "startup_ms_3"):
        if ex.get(k):
            out[k] = (ex[k], False)
    if (ex.get("rss") or {}).get("rss_MB"):
        out["rss_10k_partitions_MB"] = (ex["rss"]["rss_MB"], False)
    return out


def _ratios(results: dict) -> dict[str, tuple[float, bool]]:
    """mb1/best-peer per row: the same run's peers cancel the host's speed out of it."""
    higher = {f"{s}.{m}": h for s, m, h in ROWS}
    return {f"mb1/best {k}": (r["mb1/best"], higher[k]) for k, r in results.get("ratios", {}).items()
            if k in higher and r.get("mb1/best")}


def regressions(prev: dict, cur: dict, threshold: float = 0.10) -> list[str]:
    """Every minibroker figure, and every mb1/best-peer ratio, more than `threshold` worse than in
    the previous run. A host slower for every broker moves the figures but not the ratios."""
    out = []
    for metrics, tag in ((_metrics, "REGRESSION"), (_ratios, "RATIO REGRESSION")):
        p, c = metrics(prev), metrics(cur)
        for k, (v, higher) in c.items():
            if k not in p or not p[k][0]:
                continue
            old = p[k][0]
            change = (v - old) / old
            worse = -change if higher else change
            if worse > threshold:
                out.append(f"{tag} {k}: {_fmt(old)} -> {_fmt(v)} ({change:+.0%})")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--only", default="mbreadme,mb1,mb3,mb3s,mb3p,mock,tansu",
                    help="comma list of brokers to measure")
    ap.add_argument("--no-extras", action="store_true", help="skip start-up and RSS measurements")
    ap.add_argument("--log-memory-max-bytes", type=int, default=None,
                    help="log.memory.max.bytes for mb1 and mb3 (-1: unbounded); default: serve's "
                         "own, sized from the machine. mbreadme always runs serve's defaults")
    ap.add_argument("--max-bytes", type=float, default=2e10,
                    help="load.py's bound on each produce scenario's bytes, for every broker alike")
    ap.add_argument("--report", action="store_true",
                    help="measure nothing: write results/latest.txt again from the last run's JSON")
    a = ap.parse_args()
    if a.report:
        with open(RESULT_FILE) as f:
            results = json.load(f)
        write_report(results, None)
        return
    if a.quick:
        a.repeat, a.duration = 1, 3
    venv_py = ensure_setup()
    started = time.strftime("%Y-%m-%d %H:%M")
    results: dict = {"started": started, "repeat": a.repeat, "duration_s": a.duration,
                     "load_max_bytes": a.max_bytes,
                     "mb_log_memory_max_bytes": a.log_memory_max_bytes,
                     "python": sys.version.split()[0], "brokers": {}, "extras": {}}
    cmds = broker_commands(venv_py, a.log_memory_max_bytes)
    # The extras first: they take seconds, the brokers half an hour, and a failure should not
    # come after the long part.
    if not a.no_extras:
        samples = 5 if a.quick else 20
        results["extras"]["startup_samples"] = samples
        results["extras"]["startup_ms_1"] = startup_ms(1, samples)
        results["extras"]["startup_ms_3"] = startup_ms(3, samples)
        results["extras"]["rss"] = rss_10k_partitions()
    else:
        results["extras"]["startup_samples"] = 0
    with tempfile.TemporaryDirectory(prefix="mb-bench-") as tmp:
        results["brokers"] = run_rounds(a.only.split(","), cmds, venv_py, a, tmp)
    prev = None
    if os.path.exists(RESULT_FILE):
        with open(RESULT_FILE) as f:
            prev = json.load(f)
    write_report(results, prev)


def write_report(results: dict, prev: dict | None) -> None:
    """results/side_by_side.json and results/latest.txt from a run's results (and the run before,
    for the regression lines)."""
    lines = [f"# minibroker side by side, {results['started']}, {results['repeat']} run(s) x "
             f"{results['duration_s']:g} s per scenario (produce bounded at {results['load_max_bytes']:g} bytes),"
             " broker on CPU 1, load.py on CPU 0",
             f"# minibroker log.memory.max.bytes: mbreadme serve's default, mb1/mb3 "
             f"{results['mb_log_memory_max_bytes'] if results['mb_log_memory_max_bytes'] is not None else 'the same'}"
             " (librdkafka's mock keeps ~5 MB per partition, Tansu keeps everything)"] + table(results)
    if prev is not None:
        regs = regressions(prev, results)
        lines.append("")
        lines.append(f"vs previous run ({prev.get('started')}): "
                     + ("no regression > 10%" if not regs else f"{len(regs)} regression(s) > 10%"))
        lines.extend(regs)
    os.makedirs(RESULTS, exist_ok=True)
    with open(RESULT_FILE, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    with open(os.path.join(RESULTS, "latest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
