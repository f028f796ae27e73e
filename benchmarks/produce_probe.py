#!/usr/bin/env python3
"""Steady-state produce probe: minibroker and the librdkafka mock in alternating runs, with the
client's CPU per GB and the kernel's TCP counters, so a change to how the broker reads can be
judged in minutes rather than in a whole run.py.

    python benchmarks/produce_probe.py [--rounds 3] [--warm 4] [--duration 8] [--size 10240]
                                       [--acks all] [--only mb,mock] [--variant NAME:KEY=VALUE,...]
                                       [--checkout NAME=PATH]

Each run starts a fresh broker pinned to CPU 1 (minibroker: 1 broker, log.memory.max.bytes 1 GiB
as in run.py; the mock: 1 broker; both auto-create the topic with 4 partitions; `--only` may name
Tansu too, which keeps everything, as run.py starts it), and a producer
configured as load.py's (confluent-kafka, linger.ms 5, batch.size 1 MB, a 1 GB queue) pinned to
CPU 0. The producer runs --warm seconds, then --duration measured seconds (each phase stops at
10 M messages, 1 GB at 100 B). Printed per run: MB/s, the client's CPU seconds per GB and minor
faults and context switches, from librdkafka's statistics the Produce requests per second, the
records per batch and the produce round trip (the median of its 1 s windows' p50, the highest
p99), the broker's CPU seconds, and the `nstat` deltas that tell how
the connection ran (retransmitted segments, tail loss probes and the duplicates they caused,
out-of-order queueing, segments queued to a busy socket's backlog, pure ACKs). `nstat` counts the
whole host: run nothing else meanwhile. Needs $PERF_DIR's venv for the client (run.py sets it up)
and iproute2's nstat. `--variant mb64:log.memory.max.bytes=67108864` adds a minibroker named mb64
with those overrides on top of mb's (then `--only mb,mb64,mock`); `--checkout old=/tmp/old` adds
one run from another checkout (`git worktree add /tmp/old HEAD~1`), to set a change beside the
code before it.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys

import run          # benchmarks/run.py: the peers' launch commands

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PERF = os.path.join(os.path.dirname(REPO), "shared", "perf")
VENV_PY = os.path.join(os.environ.get("PERF_DIR", "/tmp/minibroker-perf"), "venv", "bin", "python")
NSTAT_KEYS = ("TcpRetransSegs", "TcpExtTCPLossProbes", "TcpExtTCPDSACKRecv", "TcpExtTCPOFOQueue",
              "TcpExtTCPBacklogCoalesce", "TcpExtTCPPureAcks")

# The producer, run under the perf venv: warm up, wait for a line on stdin, measure, print JSON.
CLIENT = r'''
import json, os, resource, sys, time
from confluent_kafka import Producer
RTT = []                                       # (p50, p99) of each statistics window, microseconds
BATCH = []                                     # records per batch, averaged per statistics window
TX = [0]                                       # requests sent (cumulative)

def stats(js):
    st = json.loads(js)
    for b in st["brokers"].values():
        if b["nodeid"] >= 0:
            TX[0] = b["tx"]
            if b["rtt"]["cnt"]:
                RTT.append((b["rtt"]["p50"], b["rtt"]["p99"]))
    t = st["topics"].get("probe")
    if t and t["batchcnt"]["cnt"]:
        BATCH.append(t["batchcnt"]["avg"])

bs, acks, size, warm, dur = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
p = Producer({"bootstrap.servers": bs, "acks": acks, "linger.ms": 5, "batch.size": 1000000,
              "compression.type": "none", "queue.buffering.max.messages": 1000000,
              "queue.buffering.max.kbytes": 1048576, "message.timeout.ms": 60000,
              "delivery.report.only.error": True, "log_level": 3,
              "statistics.interval.ms": 1000, "stats_cb": stats})
p.produce("probe", b"w")
p.flush(15)
batch = [{"value": os.urandom(size)}] * 1000

def run(secs):
    del RTT[:], BATCH[:]
    tx0 = TX[0]
    sent, t0, r0 = 0, time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    while time.perf_counter() < t0 + secs and sent < 10_000_000:
        n = p.produce_batch("probe", batch)
        sent += n
        p.poll(0.002 if n < len(batch) else 0)
    acked = sent - p.flush(60)
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    return {"MB_per_s": round(acked * size / wall / 1e6), "client_cpu_s_per_GB": round(cpu / (acked * size / 1e9), 3),
            "client_minor_faults": r1.ru_minflt - r0.ru_minflt,
            "client_ctx_switches": r1.ru_nvcsw - r0.ru_nvcsw + r1.ru_nivcsw - r0.ru_nivcsw,
            "requests_per_s": round((TX[0] - tx0) / wall),
            "batch_records_avg": round(sum(BATCH) / len(BATCH)) if BATCH else None,
            "rtt_p50_us": sorted(r[0] for r in RTT)[len(RTT) // 2] if RTT else None,
            "rtt_p99_us_max": max((r[1] for r in RTT), default=None)}

run(warm)
print("WARM", flush=True)
sys.stdin.readline()
print(json.dumps(run(dur)), flush=True)
'''


def _anchor():
    spec = importlib.util.spec_from_file_location("perf_anchor", os.path.join(PERF, "anchor.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _nstat() -> dict[str, int]:
    out = subprocess.run(["nstat", "-az", *NSTAT_KEYS], capture_output=True, text=True).stdout
    return {f[0]: int(f[1]) for f in (line.split() for line in out.splitlines()) if f and f[0] in NSTAT_KEYS}


def _tree(pid: int) -> list[int]:
    """pid and its descendants (Tansu runs under timeout(1))."""
    out = [pid]
    for child in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split():
        out += _tree(int(child))
    return out


def _cpu_s(pid: int) -> float:
    total = 0
    for p in _tree(pid):
        with open(f"/proc/{p}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def one_run(label: str, cmd: str, client: list[str], anchor) -> dict:
    """A fresh broker from `cmd` pinned to CPU 1 and `client` (a CLIENT script's argv after its
    bootstrap) on CPU 0: the client warms up, prints WARM, measures on a line from stdin and
    prints its JSON; the broker's CPU seconds and the `nstat` deltas over the measured part are
    added to it."""
    proc, bootstrap = anchor.start_peer(f"exec taskset -c 1 bash -c {shlex.quote(cmd)}", f"/tmp/probe-{label}.log")
    try:
        child = subprocess.Popen(["taskset", "-c", "0", VENV_PY, "-c", client[0], bootstrap, *client[1:]],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if child.stdout.readline().strip() != "WARM":
            raise RuntimeError(f"{label}: the client did not warm up")
        before, cpu0 = _nstat(), _cpu_s(proc.pid)
        child.stdin.write("\n")
        child.stdin.flush()
        res = json.loads(child.stdout.readline())
        res["broker_cpu_s"] = round(_cpu_s(proc.pid) - cpu0, 2)
        after = _nstat()
        res.update({k: after.get(k, 0) - before.get(k, 0) for k in NSTAT_KEYS})
        child.wait(30)
        return res
    finally:
        anchor.stop_peer(proc)


def add_broker_args(ap: argparse.ArgumentParser, warm: float) -> None:
    """The options every probe takes: rounds, brokers, and the client's warm-up and measured time."""
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warm", type=float, default=warm)
    ap.add_argument("--duration", type=float, default=8)
    ap.add_argument("--only", default="mb,mock")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE,...",
                    help="another minibroker, with these overrides on top of mb's")
    ap.add_argument("--checkout", action="append", default=[], metavar="NAME=PATH",
                    help="a minibroker run from another checkout of this repository")


def broker_cmds(a) -> dict[str, str]:
    """label → the shell command that starts it: mb, the mock, --checkout and --variant ones."""
    mb = (f"cd {shlex.quote(REPO)} && exec {shlex.quote(sys.executable)} -m minibroker serve --port 0"
          " --brokers 1 --override log.memory.max.bytes=1073741824 --override num.partitions=4")
    cmds = {"mb": mb,
            **{peer: run.broker_commands(VENV_PY, -1)[peer][0] for peer in ("mock", "tansu")}}
    for c in a.checkout:
        name, _, path = c.partition("=")
        cmds[name] = mb.replace(f"cd {shlex.quote(REPO)} ", f"cd {shlex.quote(os.path.abspath(path))} ")
    for v in a.variant:
        name, _, overrides = v.partition(":")
        cmds[name] = mb + "".join(f" --override {shlex.quote(o)}" for o in overrides.split(",") if o)
    return cmds


def alternate(a, client: list[str]) -> None:
    """--rounds rounds of every --only broker, in reverse order on odd rounds; a line per run."""
    cmds, anchor = broker_cmds(a), _anchor()
    labels = a.only.split(",")
    for r in range(min(a.rounds, 20)):
        for label in labels if r % 2 == 0 else labels[::-1]:
            print(label, json.dumps(one_run(label, cmds[label], client, anchor)), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_broker_args(ap, warm=4)
    ap.add_argument("--size", type=int, default=10240)
    ap.add_argument("--acks", default="all")
    a = ap.parse_args()
    a.duration, a.warm = min(a.duration, 60), min(a.warm, 60)
    alternate(a, [CLIENT, a.acks, str(a.size), str(a.warm), str(a.duration)])


if __name__ == "__main__":
    main()
