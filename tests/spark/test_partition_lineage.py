"""Partitions that disappear and numbers that come back, under a running ordered query.

A keyed stream (value = the key's seq) while its topic goes 4 -> 8 -> 12 -> 6: partitions 6..11
marked for deletion, drained with DeleteRecords once the query delivered them, and removed
(KIP-253); the query's driver is killed with `kill -9` while they are gone; the topic grows
6 -> 10 (numbers 6..9 created again, one leader epoch above their last incarnation) and those
get more records than the old ones had, before the driver restarts from its checkpoint. The
query must never fail: a removed partition gets no ListOffsets and its range is closed, a reused
number is read from its start as a new lineage (its leader epoch decides, not the number), and
per-key order holds across the whole history (micro-batch, partition, offset). The same run with
orderedDelivery=false shows the order violations the connector prevents.

The driver is its own process (tests/spark/stream_driver.py: its own JVM) so that it can be
killed; its sink writes each micro-batch id once, as an idempotent sink would.
"""
from __future__ import annotations

import asyncio
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pandas as pd
import pytest

from minibroker.client import Admin, Producer, TopicPartition
from minibroker.spark.checker import check_pandas

pytestmark = pytest.mark.timeout(1800)

N = 4
KEYS = [b"k%03d" % i for i in range(96)]
BURST = 3000
HERE = os.path.dirname(os.path.abspath(__file__))


class Producing:
    """Keyed records from a thread: `burst` at once, then ~`rate`/s; acked (key, seq) recorded."""

    def __init__(self, bootstrap: str, topic: str, rate: float, burst: int) -> None:
        self.bootstrap, self.topic, self.rate, self.burst = bootstrap, topic, rate, burst
        self.acked: list[tuple[str, int]] = []
        self.where: dict[tuple[str, int], tuple[int, int]] = {}   # (key, seq) -> (partition, offset)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def _acked(self, key: str, seq: int, md) -> None:
        self.acked.append((key, seq))
        self.where[(key, seq)] = (md.partition, md.offset)

    def missing(self, delivered: list[tuple]) -> str:
        """Acked records not delivered, by partition: how many and their offset range."""
        got = {(k, s) for _, k, s, _, _ in delivered}
        by: dict[int, list[int]] = {}
        for ks in self.acked:
            if ks not in got:
                p, o = self.where[ks]
                by.setdefault(p, []).append(o)
        return ", ".join(f"p{p}: {len(o)} in [{min(o)}, {max(o)}]" for p, o in sorted(by.items()))

    async def _run(self) -> None:
        seq = {k: 0 for k in KEYS}
        async with Producer(self.bootstrap, linger_ms=5, retry_backoff_ms=20) as p:
            futs, i = [], 0
            while not self.stop.is_set():
                for _ in range(20):
                    k = KEYS[i % len(KEYS)]
                    i += 7
                    s = seq[k]
                    seq[k] += 1
                    f = p.send(self.topic, b"%d" % s, key=k)
                    f.add_done_callback(lambda f, k=k, s=s: f.exception() is None
                                        and self._acked(k.decode(), s, f.result()))
                    futs.append(f)
                await asyncio.sleep(20 / self.rate if len(futs) >= self.burst else 0)
            await asyncio.gather(*futs, return_exceptions=True)


def _admin(bootstrap: str, fn):
    async def go():
        async with Admin(bootstrap) as a:
            return await fn(a)
    return asyncio.run(go())


def _state(bootstrap: str, topic: str, undeleted: int, partitions: int, timeout: float = 60) -> None:
    async def go(a):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            await a.metadata.refresh([topic])
            md = a.metadata.topic(topic)
            if md is not None and md.undeleted_partition_count == undeleted \
                    and len(md.partitions) == partitions:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{topic} never reached {undeleted}/{partitions}")
    _admin(bootstrap, go)


def _latest(bootstrap: str, topic: str, parts) -> dict[int, int]:
    got = _admin(bootstrap, lambda a: a.list_offsets({TopicPartition(topic, p): "latest"
                                                      for p in parts}))
    return {tp.partition: off for tp, (off, _) in got.items()}


def _delivered(out: str) -> list[tuple]:
    rows = []
    for path in sorted(glob.glob(os.path.join(out, "batch-*.json"))):
        batch = int(os.path.basename(path)[6:12])
        with open(path) as f:
            rows.extend((batch, k, s, p, o) for k, s, p, o in json.load(f))
    return rows


class Driver:
    def __init__(self, bootstrap: str, topic: str, ordered: bool) -> None:
        self.args = [sys.executable, os.path.join(HERE, "stream_driver.py"), bootstrap, topic,
                     tempfile.mkdtemp(prefix="lineage-ckpt-"), tempfile.mkdtemp(prefix="lineage-out-"),
                     str(ordered).lower()]
        self.out = self.args[5]
        self.logs: list[str] = []
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = os.path.join(self.out, f"driver-{len(self.logs)}.log")
        self.logs.append(log)
        with open(log, "w") as f:           # a file: a pipe nobody reads could block the driver
            self.proc = subprocess.Popen(self.args, stdout=f, stderr=subprocess.STDOUT)

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"the driver exited ({self.proc.returncode}):\n" + self.tail())

    def tail(self) -> str:
        with open(self.logs[-1]) as f:
            return "".join(l for l in f.readlines()[-40:])

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        open(os.path.join(self.out, "stop"), "w").close()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)


def _wait(cond, what, driver: Driver, timeout: float, why=lambda: "") -> None:
    end = time.monotonic() + timeout
    while not cond():
        driver.check_alive()
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what} {why()}\n" + driver.tail())
        time.sleep(0.3)


def scenario(kafka, topic: str, ordered: bool):
    b = kafka.bootstrap
    kafka.call(kafka.cluster.create_topic, topic, N, 2)
    prod = Producing(b, topic, rate=30, burst=BURST)
    prod.thread.start()
    driver = Driver(b, topic, ordered)
    try:
        end = time.monotonic() + 120
        while len(prod.acked) < BURST and time.monotonic() < end:
            time.sleep(0.1)
        driver.start()
        _wait(lambda: _delivered(driver.out), "a first micro-batch", driver, 600)
        for count in (2 * N, 3 * N):            # expansions while the old partitions have backlog
            _admin(b, lambda a: a.create_partitions({topic: count}))
            _state(b, topic, count, count)
            time.sleep(3)
        _admin(b, lambda a: a.create_partitions({topic: 6}))
        _state(b, topic, 6, 12)                 # 6..11 marked for deletion
        time.sleep(1)
        old = _latest(b, topic, range(6, 12))   # nothing more is produced to them

        def read_all_marked():
            got = {}
            for _, _, _, p, o in _delivered(driver.out):
                got[p] = max(got.get(p, -1), o)
            return all(got.get(p, -1) >= old[p] - 1 for p in old if old[p] > 0)
        _wait(read_all_marked, "the marked partitions delivered", driver, 420)
        _admin(b, lambda a: a.delete_records({TopicPartition(topic, p): -1 for p in old}))
        _state(b, topic, 6, 6)                  # drained and removed
        time.sleep(2)                           # planned at least once without them
        driver.check_alive()
        driver.kill9()
        _admin(b, lambda a: a.create_partitions({topic: 10}))
        _state(b, topic, 10, 10)                # 6..9 again: new incarnations
        end = time.monotonic() + 120            # past the old incarnations' offsets
        while time.monotonic() < end and \
                any(v <= old[p] for p, v in _latest(b, topic, range(6, 10)).items()):
            time.sleep(0.5)
        driver.start()
        time.sleep(3)
        prod.stop.set()
        prod.thread.join(60)
        want = set(prod.acked)
        _wait(lambda: want <= {(k, s) for _, k, s, _, _ in _delivered(driver.out)},
              "every acked record delivered", driver, 600,    # a loaded CI host: minutes
              lambda: f"(missing: {prod.missing(_delivered(driver.out))}; old offsets {old})")
        driver.check_alive()
    finally:
        prod.stop.set()
        if driver.proc is not None and driver.proc.poll() is None:
            driver.stop()
    produced = pd.DataFrame(prod.acked, columns=["key", "seq"])
    got = pd.DataFrame(_delivered(driver.out), columns=["batch", "key", "seq", "partition", "offset"])
    r = check_pandas(produced, got, order_by=("batch", "partition", "offset"))
    print(f"orderedDelivery={ordered}: {r.summary()} micro-batches={got['batch'].nunique()} "
          f"partitions={sorted(got['partition'].unique())} old offsets={old}")
    return r, got


def test_removed_and_reused_partitions_under_a_killed_ordered_query(kafka):
    r, got = scenario(kafka, "lineage-ordered", ordered=True)
    assert set(got["partition"]) == set(range(12))
    assert r.losses == 0 and r.duplicates == 0 and r.violations == 0, (r.summary(), r.examples)
    assert r.records > BURST and r.keys == len(KEYS)


def test_the_same_run_without_ordered_delivery_shows_violations(kafka):
    r, got = scenario(kafka, "lineage-unordered", ordered=False)
    assert r.losses == 0, r.summary()
    assert r.violations > 0, r.summary()
