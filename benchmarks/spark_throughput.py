#!/usr/bin/env python3
"""Spark batch read and write of 100-byte records through format("minibroker"), side by side with a
confluent-kafka (librdkafka) consumer and producer on the same broker, in the same run.

    python benchmarks/spark_throughput.py [--records 1000000] [--size 100] [--partitions 4]
                                          [--master local[2]]

Starts `python -m minibroker serve --brokers 1 --port 0` (one broker, so the broker is the same
for both clients), then, in this order: confluent-kafka produces --records keyless values of --size
bytes to topic `bench-ck` (acks=all, linger 5 ms) and consumes them from the beginning; Spark
writes the same number to `bench-spark` (`spark.range` -> value column ->
`df.write.format("minibroker")`, one task per Spark core) and reads `bench-ck` in batch
(`sum(length(value))`, so every value is materialised).  A Spark write, and a read, of 100k
records to `bench-warm` right before each Spark phase warm the JVM (its JIT) and the Python
workers; session start-up is not counted.  Prints records/s and Spark/confluent
ratios, and the CPU seconds each phase cost (this process and every process under it -- the JVM,
the Python workers -- split into java and python, plus the broker, counted once), which a shared
machine's load distorts less than the wall clock.  Needs the `spark` and `test` extras (confluent-kafka).  The machine may be shared: run it
more than once before trusting a figure.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start_broker():
    proc = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "1", "--port", "0"],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    line = proc.stdout.readline()
    assert line.startswith("BOOTSTRAP "), line
    return proc, line.split()[1]


def tree_cpu(root: int, skip: int = -1) -> dict[int, tuple[str, float]]:
    """{pid: (java or python, CPU seconds (user + system))} of `root` and its live descendants but
    `skip`'s subtree, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            name, fields = text[text.index("(") + 1:text.rindex(")")], text.rsplit(")", 1)[1].split()
            stats[int(d)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick,
                             "java" if name == "java" else "python")
    out: dict[int, tuple[str, float]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid == skip or pid not in stats:
            continue
        out[pid] = stats[pid][2], stats[pid][1]
        todo.extend(c for c, (ppid, _, _) in stats.items() if ppid == pid)
    return out


class Phase:
    """Wall and CPU seconds of one phase: ours (the JVM and Python workers under us) and the
    broker's (our child too, counted apart). Per process alive at the end, the CPU it used since
    the start (all of it if it started since): a worker that exits mid-phase loses what it used
    in the phase, instead of taking its whole life's CPU out of the sum."""

    def __init__(self, broker_pid: int) -> None:
        self.broker_pid = broker_pid

    def _cpu(self) -> tuple[dict[int, tuple[str, float]], dict[int, tuple[str, float]]]:
        return tree_cpu(os.getpid(), self.broker_pid), tree_cpu(self.broker_pid)

    def __enter__(self) -> "Phase":
        self.cpu0 = self._cpu()
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        (client, broker), (client0, broker0) = self._cpu(), self.cpu0
        self.split: dict[str, float] = {}
        for pid, (name, cpu) in sorted(client.items()):
            self.split[name] = self.split.get(name, 0.0) + cpu - client0.get(pid, (name, 0.0))[1]
        self.client_cpu = sum(self.split.values())
        self.broker_cpu = sum(cpu - broker0.get(pid, (name, 0.0))[1]
                              for pid, (name, cpu) in broker.items())

    def line(self, n: int) -> str:
        split = ", ".join(f"{k} {v:.1f}" for k, v in self.split.items() if v >= 0.05)
        return (f"{n / self.wall:9.0f} rec/s ({self.wall:5.1f} s; CPU s client {self.client_cpu:5.1f}"
                f" [{split}] broker {self.broker_cpu:4.1f})")


def create_topics(bootstrap: str, names, partitions: int) -> None:
    from minibroker.client import Admin, NewTopic

    async def go():
        async with Admin(bootstrap) as a:
            await a.create_topics([NewTopic(n, partitions, 1) for n in names])
    asyncio.run(go())


def ck_produce(bootstrap: str, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                  "batch.size": 1000000, "queue.buffering.max.messages": 1000000, "log_level": 3})
    value = os.urandom(size)
    t = time.perf_counter()
    sent = 0
    while sent < n:
        try:
            p.produce(topic, value)
            sent += 1
        except BufferError:
            p.poll(0.01)
    assert p.flush(120) == 0
    return time.perf_counter() - t


def ck_consume(bootstrap: str, topic: str, n: int) -> float:
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "fetch.max.bytes": 52428800, "log_level": 3})
    c.subscribe([topic])
    got, nbytes = 0, 0
    t = time.perf_counter()
    while got < n and time.perf_counter() - t < 600:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
                nbytes += len(m.value())
    dt = time.perf_counter() - t
    c.close()
    assert got == n, got
    return dt


WARM = 100_000          # records of each warm-up: the JVM's JIT and the Python workers


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--master", default="local[2]")
    a = ap.parse_args()
    proc, bootstrap = start_broker()
    try:
        create_topics(bootstrap, ["bench-ck", "bench-spark", "bench-warm"], a.partitions)
        from minibroker.spark.session import local_session
        spark = local_session(a.master, "minibroker-bench")
        cores = spark.sparkContext.defaultParallelism

        def spark_write(topic: str, n: int) -> None:
            (spark.range(n, numPartitions=cores)
             .selectExpr(f"CAST(repeat('x', {a.size}) AS BINARY) AS value")
             .write.format("minibroker").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).mode("append").save())

        def spark_read(topic: str):
            return spark.read.format("minibroker").option("kafka.bootstrap.servers", bootstrap) \
                .option("subscribe", topic).load() \
                .selectExpr("count(*) AS n", "sum(length(value)) AS b").collect()[0]

        with Phase(proc.pid) as ck_w:
            ck_produce(bootstrap, "bench-ck", a.records, a.size)
        with Phase(proc.pid) as ck_r:
            ck_consume(bootstrap, "bench-ck", a.records)
        # Each Spark phase right after a warm-up of its own (not counted): Spark stops Python
        # workers idle for a minute, and a fresh one costs ~1 CPU s of imports on this machine.
        spark_write("bench-warm", WARM)
        with Phase(proc.pid) as sp_w:
            spark_write("bench-spark", a.records)
        assert spark_read("bench-warm").n == WARM
        with Phase(proc.pid) as sp_r:
            row = spark_read("bench-ck")
        assert row.n == a.records and row.b == a.records * a.size, row
        n = a.records
        print(f"{n} records of {a.size} B, {a.partitions} partitions, Spark {a.master}, 1 minibroker broker; "
              f"load average {os.getloadavg()[0]:.1f}")
        for what, ck, sp in (("write", ck_w, sp_w), ("read ", ck_r, sp_r)):
            print(f"{what}: confluent-kafka {ck.line(n)}")
            print(f"       spark           {sp.line(n)}")
            cpu = (sp.client_cpu + sp.broker_cpu) / (ck.client_cpu + ck.broker_cpu)
            print(f"       ratio spark/confluent: {ck.wall / sp.wall:.2f} by wall clock, "
                  f"{1 / cpu:.2f} by CPU seconds (Spark's CPU = {cpu:.2f}x confluent-kafka's)")
        spark.stop()
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(30)


if __name__ == "__main__":
    main()
