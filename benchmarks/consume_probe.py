#!/usr/bin/env python3
"""Steady-state consume probe: load.py's consume loop against minibroker and the librdkafka mock in
alternating runs, with what the consuming client pays per GB and how the broker sized its responses.

    python benchmarks/consume_probe.py [--rounds 3] [--fill 2300000] [--size 100] [--warm 3]
                                       [--duration 8] [--only mb,mock] [--variant NAME:KEY=VALUE,...]
                                       [--checkout NAME=PATH]

Each run starts a fresh broker as produce_probe.py does (pinned to CPU 1; minibroker 1 broker with
log.memory.max.bytes 1 GiB; 4 partitions auto-created), fills the topic with --fill records of
--size bytes (producer as load.py's), then consumes it as load.py's consume scenario does (the same
consumer settings; each partition that reaches the end it saw at the start is sought back to its
start) for --warm seconds and --duration measured seconds, pinned to CPU 0. The default fill is
what minibroker held of its 100 B topic in run.py's rounds (~2.3 M records); the mock keeps ~5 MB
per partition of it. Printed per run: MB/s, the client's CPU seconds per GB and minor faults per
GB, the rewinds, the broker's fetch responses (count and mean size, from librdkafka's statistics),
and the broker's CPU seconds.
"""
from __future__ import annotations

import argparse

from produce_probe import add_broker_args, alternate

# load.py's producer, acks=all; its own process when --big-from other
PRODUCE = r'''
import os, sys
from confluent_kafka import Producer

def produce(bs, topic, size, count):
    p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 5, "batch.size": 1000000,
                  "compression.type": "none", "queue.buffering.max.messages": 1000000,
                  "queue.buffering.max.kbytes": 1048576, "log_level": 3})
    batch, sent = [{"value": os.urandom(size)}] * 1000, 0
    while sent < count:
        n = p.produce_batch(topic, batch)
        sent += n
        p.poll(0.002 if n < len(batch) else 0)
    assert p.flush(60) == 0, "the fill was not acknowledged"
'''

CLIENT = PRODUCE + r'''
import json, resource, subprocess, time
from confluent_kafka import Consumer, KafkaError, TopicPartition

bs, size, fill, warm, dur = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
big, big_from, produce_src = int(float(sys.argv[6]) * 1e9 / 10240), sys.argv[7], sys.argv[8]
produce(bs, "probe", size, fill)
if big and big_from == "self":         # as in load.py: the 10 KiB scenarios ran in this process
    produce(bs, "probe-10k", 10240, big)
elif big:                              # the same traffic from another process: the broker's state alone
    subprocess.run([sys.executable, "-c", produce_src + "produce(*sys.argv[1:3], 10240, int(sys.argv[3]))",
                    bs, "probe-10k", str(big)], check=True)

RX = {}                                            # broker name -> (responses, bytes), cumulative

def stats(js):
    for b in json.loads(js)["brokers"].values():
        if b["nodeid"] >= 0:
            RX[b["name"]] = (b["rx"], b["rxbytes"])

c = Consumer({"bootstrap.servers": bs, "group.id": "probe", "enable.auto.commit": False,
              "auto.offset.reset": "earliest", "fetch.max.bytes": 52428800,
              "max.partition.fetch.bytes": 10485760, "queued.max.messages.kbytes": 262144,
              "queued.min.messages": 1000000, "fetch.queue.backoff.ms": 1, "fetch.wait.max.ms": 100,
              "log_level": 3, "enable.partition.eof": True,
              "statistics.interval.ms": 500, "stats_cb": stats})
parts = sorted(c.list_topics(topic="probe", timeout=10).topics["probe"].partitions)
wm = {q: c.get_watermark_offsets(TopicPartition("probe", q), timeout=10, cached=False) for q in parts}
live = [q for q in parts if wm[q][1] > wm[q][0]]
pending = {q: False for q in live}
c.assign([TopicPartition("probe", q, wm[q][0]) for q in live])

def run(secs):
    n = nbytes = rewinds = 0
    rx0, t0, r0 = sum(v[0] for v in RX.values()), time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    rxb0 = sum(v[1] for v in RX.values())
    while time.perf_counter() < t0 + secs:
        for m in c.consume(10000, 0.1):            # load.py's loop
            e, q = m.error(), m.partition()
            lo, hi = wm[q]
            if e is not None:
                if e.code() != KafkaError._PARTITION_EOF:
                    continue
                at_end = True
            else:
                off = m.offset()
                if off == lo:
                    pending[q] = False
                if off < hi:
                    n += 1
                    nbytes += len(m.value())
                at_end = off >= hi - 1
            if at_end and not pending[q]:
                c.seek(TopicPartition("probe", q, lo))
                pending[q] = True
                rewinds += 1
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
    cpu, gb = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime, max(nbytes, 1) / 1e9
    rx, rxb = sum(v[0] for v in RX.values()) - rx0, sum(v[1] for v in RX.values()) - rxb0
    return {"MB_per_s": round(nbytes / wall / 1e6, 1), "client_cpu_pct": round(100 * cpu / wall, 1),
            "client_cpu_s_per_GB": round(cpu / gb, 3),
            "client_minor_faults_per_GB": round((r1.ru_minflt - r0.ru_minflt) / gb),
            "retained_msgs": sum(hi - lo for lo, hi in wm.values()), "rewinds": rewinds,
            "responses": rx, "response_kB": round(rxb / rx / 1e3) if rx else None}

run(warm)
print("WARM", flush=True)
sys.stdin.readline()
print(json.dumps(run(dur)), flush=True)
c.close()
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_broker_args(ap, warm=3)
    ap.add_argument("--fill", type=int, default=2_300_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--big", type=float, default=0, help="GB of 10 KiB records produced after the fill")
    ap.add_argument("--big-from", choices=["self", "other"], default="self",
                    help="produce --big from the consuming client's process (as load.py) or another")
    a = ap.parse_args()
    a.fill, a.warm, a.duration = min(a.fill, 20_000_000), min(a.warm, 60), min(a.duration, 60)
    alternate(a, [CLIENT, str(a.size), str(a.fill), str(a.warm), str(a.duration), str(min(a.big, 40)),
                  a.big_from, PRODUCE])


if __name__ == "__main__":
    main()
