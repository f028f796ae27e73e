#!/usr/bin/env python3
"""What TLS and SASL cost the broker: produce and consume MB/s over SASL_SSL (SCRAM-SHA-512)
beside PLAINTEXT, in the same run against the same broker, and the broker's CPU seconds per GB.

    python benchmarks/tls_cost.py [--mb 512] [--size 10240] [--rounds 3]

One `serve --brokers 1` process with two listeners (PLAINTEXT and SASL_SSL, a CA generated in a
temporary directory) pinned to CPU 1 when the host has two; the clients are confluent-kafka
(librdkafka) in this process (CPU 0): a producer (acks=1, linger.ms 5, batch.size 1 MB) sends
--mb MB of --size-byte records to a fresh 4-partition topic, then a consumer reads them back and
the topic is deleted (after an unmeasured warm-up topic, so that every phase reuses freed memory).
The broker's CPU is read from /proc/<pid>/stat around each phase. Rounds alternate the order of
the two listeners; medians are printed. Target (issue 41): TLS at most 1.5x PLAINTEXT's broker
CPU per GB on 10 KiB records. Each round also times the cipher alone (`openssl speed -evp
aes-128-gcm` on 16 KiB blocks, a TLS record's size, on the broker's CPU): PLAINTEXT's CPU per GB
plus that is the floor of TLS's, printed as a ratio beside the measured one. Self-contained: it
does not use ../shared/perf.
"""
from __future__ import annotations

import argparse
import os
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

USER, PASSWORD = "bench", "bench-secret"


def broker_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_broker(tls_dir: str) -> tuple[subprocess.Popen, dict]:
    cmd = [sys.executable, "-m", "minibroker", "serve", "--brokers", "1", "--port", "0",
           "--tls-dir", tls_dir, "--user", f"{USER}:{PASSWORD}",
           "--override", "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
           "--override", "num.partitions=4", "--override", "log.memory.max.bytes=1073741824",
           "--override", "group.initial.rebalance.delay.ms=0"]
    if os.cpu_count() and os.cpu_count() >= 2:
        cmd = ["taskset", "-c", "1", *cmd]
        os.sched_setaffinity(0, {0})
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()
    out: dict = {}
    while not {"PLAINTEXT", "SASL_SSL", "ca"} <= set(out):
        word, _, rest = lines.get(timeout=60).strip().partition(" ")
        if word == "CA":
            out["ca"] = rest
        elif word == "LISTENER":
            name, bootstrap = rest.split()
            out[name] = bootstrap
    return proc, out


def cipher_s_per_gb() -> float | None:
    """CPU seconds per GB of AES-128-GCM alone (the suite the broker prefers), on the broker's CPU."""
    cmd = ["openssl", "speed", "-seconds", "1", "-bytes", "16384", "-evp", "aes-128-gcm"]
    if os.cpu_count() and os.cpu_count() >= 2:
        cmd = ["taskset", "-c", "1", *cmd]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
        rate = float(out.strip().splitlines()[-1].split()[-1].rstrip("k")) * 1000
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None                         # no openssl: the floor is not printed
    return 1e9 / rate


def client_config(listener: str, addrs: dict) -> dict:
    c = {"bootstrap.servers": addrs[listener]}
    if listener == "SASL_SSL":
        c.update({"security.protocol": "SASL_SSL", "ssl.ca.location": addrs["ca"],
                  "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
                  "sasl.password": PASSWORD})
    return c


def produce(conf: dict, topic: str, total: int, size: int) -> float:
    p = Producer({**conf, "acks": 1, "linger.ms": 5, "batch.size": 1 << 20,
                  "queue.buffering.max.kbytes": 1 << 20, "compression.type": "none"})
    payload = os.urandom(size)
    start = time.perf_counter()
    for i in range(total // size):
        while True:
            try:
                p.produce(topic, payload, partition=i % 4)
                break
            except BufferError:
                p.poll(0.005)
    p.flush(120)
    return time.perf_counter() - start


def consume(conf: dict, topic: str, total: int) -> float:
    c = Consumer({**conf, "group.id": f"bench-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    c.subscribe([topic])
    got, start = 0, time.perf_counter()
    deadline = start + 300
    while got < total and time.perf_counter() < deadline:
        for m in c.consume(1000, 1.0):
            if not m.error():
                got += len(m.value())
    elapsed = time.perf_counter() - start
    c.close()
    return elapsed


def delete_topic(conf: dict, topic: str) -> None:
    """Each phase's records are dropped after it: past log.memory.max.bytes the broker would spill
    to disk, and that CPU would land on whichever phase crossed the line."""
    admin = AdminClient(conf)               # kept until the result: its handle serves the future
    admin.delete_topics([topic])[topic].result(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=512)
    ap.add_argument("--size", type=int, default=10240)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    total = args.mb * 1_000_000 // args.size * args.size    # whole records
    results: dict = {(l, ph): [] for l in ("PLAINTEXT", "SASL_SSL") for ph in ("produce", "consume")}
    ciphers: list[float] = []
    with tempfile.TemporaryDirectory() as tls:
        proc, addrs = start_broker(tls)
        try:
            # Unmeasured: the first phase would otherwise be the only one paying for fresh pages
            # (every later one reuses the memory of the topics deleted before it).
            warm = client_config("PLAINTEXT", addrs)
            produce(warm, "bench-warm-up", total, args.size)
            delete_topic(warm, "bench-warm-up")
            for rnd in range(args.rounds):
                order = ("PLAINTEXT", "SASL_SSL") if rnd % 2 == 0 else ("SASL_SSL", "PLAINTEXT")
                for listener in order:
                    conf, topic = client_config(listener, addrs), f"bench-{listener}-{rnd}"
                    for phase in ("produce", "consume"):
                        cpu0 = broker_cpu_s(proc.pid)
                        secs = (produce(conf, topic, total, args.size) if phase == "produce"
                                else consume(conf, topic, total))
                        cpu = broker_cpu_s(proc.pid) - cpu0
                        results[(listener, phase)].append((total / 1e6 / secs, cpu / (total / 1e9)))
                        print(f"round {rnd} {listener:9} {phase:7} {total / 1e6 / secs:8.1f} MB/s"
                              f"  broker {cpu / (total / 1e9):6.2f} CPU s/GB", flush=True)
                    delete_topic(conf, topic)
                cipher = cipher_s_per_gb()
                if cipher is not None:
                    ciphers.append(cipher)
                    print(f"round {rnd} AES-128-GCM alone {cipher:6.2f} CPU s/GB", flush=True)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
    print(f"\n# medians of {args.rounds} rounds, {args.mb} MB of {args.size} B records per phase; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for phase in ("produce", "consume"):
        plain = [statistics.median(x) for x in zip(*results[("PLAINTEXT", phase)])]
        tls_ = [statistics.median(x) for x in zip(*results[("SASL_SSL", phase)])]
        print(f"{phase:8} PLAINTEXT {plain[0]:8.1f} MB/s {plain[1]:6.2f} CPU s/GB | SASL_SSL "
              f"{tls_[0]:8.1f} MB/s {tls_[1]:6.2f} CPU s/GB | TLS/PLAINTEXT CPU per GB "
              f"{tls_[1] / plain[1]:.2f}x (target <= 1.5x)")
        if ciphers:
            cipher = statistics.median(ciphers)
            print(f"{phase:8} floor: PLAINTEXT + AES-128-GCM alone ({cipher:.2f} CPU s/GB) = "
                  f"{(plain[1] + cipher) / plain[1]:.2f}x PLAINTEXT")


if __name__ == "__main__":
    main()
