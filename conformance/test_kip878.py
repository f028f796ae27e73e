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
import random
import time

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
    offsets = await admin.list_offsets({tp: "latest" for tp in tps})
    ends = {tp: o for tp, (o, _) in offsets.items()}
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
            raise AssertionError(f"aggregates wrong after {timeout}s: {list(wrong.items())[:5]}")
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
                       stay=len(stay), attempts=app.autoscaler.attempts,
                       failed_attempts=app.autoscaler.failed_attempts,
                       faults_left=cluster.faults.pop_topic_error(37, REPARTITION),
                       followups=app.followups_asked)
            await app.close()
        await admin.close()
        return out


def _check_expansion(r: dict, faults: bool) -> None:
    print(f"expansion: {r}")
    if faults:        # both forced refusals were met, the first beside the changelog's success;
        # each retried after the throttle time, the success followed up 10 s later
        assert r["faults_left"] == (0, 0) and r["failed_attempts"] == 2 and r["attempts"] == 3
        assert r["followups"] == [1.0, 1.0, 10.0]
    else:
        assert r["attempts"] == 1 and r["failed_attempts"] == 0
        assert r["followups"] == [10.0]
    assert r["widths"] == {REPARTITION: 8, CHANGELOG: 8}
    assert r["expansions"] == [(4, 8)]
    assert r["before"] == ((4, 4), (4, 4)) and r["after"] == ((8, 8), (8, 8))
    assert all(not moved for moved in r["moved"].values()), r["moved"]
    assert r["failures"] == 0 and r["state"] == "RUNNING"


def test_internal_topics_follow_the_input_without_a_restart():
    _check_expansion(run(expansion_scenario(faults=False)), faults=False)


def test_autoscaling_through_quota_partial_failure_and_propagation_delay():
    _check_expansion(run(expansion_scenario(faults=True)), faults=True)


async def timeout_scenario() -> dict:
    """The repartition topic's expansion keeps failing for longer than the autoscaling timeout."""
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as cluster:
        await cluster.create_topic("input", 4)
        await cluster.create_topic("output", 4)
        app = KafkaStreams(topology(), cluster.bootstrap,
                           config(**{"partition.autoscaling.timeout.ms": 3000}))
        admin = Admin(cluster.bootstrap)
        async with Producer(cluster.bootstrap, linger_ms=2) as producer:
            await app.start()
            feed = Feed(producer)
            keys = [b"user-%03d" % i for i in range(40)]
            await feed.send(keys, rounds=2)
            await caught_up(cluster.bootstrap, admin, feed)
            cluster.fail_create_partitions(REPARTITION, ThrottlingQuotaExceededError, times=10**6,
                                           throttle_time_ms=500)
            await admin.create_partitions({"output": 8})
            await admin.create_partitions({"input": 8})
            await until(lambda: app.metric("num-autoscaling-failures") == 1, 60,
                        "num-autoscaling-failures == 1")
            attempts = app.autoscaler.attempts
            # still running at the old width: records keep flowing through both sub-topologies
            await feed.send(staying_keys(keys, 4, 4, 8), rounds=2)
            await caught_up(cluster.bootstrap, admin, feed)
            await asyncio.sleep(5)
            out = dict(failures=app.metric("num-autoscaling-failures"), state=app.state,
                       widths=await widths(admin, *INTERNAL), attempts=attempts,
                       attempts_later=app.autoscaler.attempts,
                       current=parallelism(app, "current"), expected=parallelism(app, "expected"))
            await app.close()
        await admin.close()
        return out


def test_autoscaling_gives_up_after_its_timeout_and_the_app_keeps_running():
    r = run(timeout_scenario())
    print(f"timeout: {r}")
    assert r["failures"] == 1 and r["state"] == "RUNNING"
    # the changelog went through on the first attempt; the repartition topic never did
    assert r["widths"] == {REPARTITION: 4, CHANGELOG: 8}
    assert r["attempts"] >= 3 and r["attempts_later"] == r["attempts"]   # no retries after
    assert r["current"] == (8, 4) and r["expected"] == (8, 8)


# ------------------------------------------------------------------------------------ 3
async def disabled_scenario() -> dict:
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as cluster:
        await cluster.create_topic("input", 4)
        await cluster.create_topic("output", 4)
        apps = [KafkaStreams(topology(), cluster.bootstrap,
                             config(**{"partition.autoscaling.enabled": False}))
                for _ in range(2)]
        admin = Admin(cluster.bootstrap)
        async with Producer(cluster.bootstrap, linger_ms=2) as producer:
            for app in apps:
                await app.start()
            feed = Feed(producer)
            await feed.send([b"user-%03d" % i for i in range(20)], rounds=2)
            await caught_up(cluster.bootstrap, admin, feed)
            await admin.create_partitions({"input": 8})
            await until(lambda: all(a.state == "ERROR" for a in apps), 30, "both apps in ERROR")
            await asyncio.sleep(5)
            out = dict(codes=[a.error.code for a in apps], widths=await widths(admin, *INTERNAL),
                       attempts=[a.autoscaler.attempts for a in apps],
                       expected=[a.metric("expected-subtopology-parallelism") for a in apps],
                       failures=[a.metric("num-autoscaling-failures") for a in apps],
                       error=str(apps[0].error))
            for app in apps:
                await app.close()
        await admin.close()
        return out


def test_disabled_autoscaling_reports_incomplete_source_topic_metadata():
    r = run(disabled_scenario())
    print(f"disabled: {r}")
    assert r["codes"] == [INCOMPLETE_SOURCE_TOPIC_METADATA] * 2
    assert r["widths"] == {REPARTITION: 4, CHANGELOG: 4} and r["attempts"] == [0, 0]
    assert r["expected"] == [None, None] and r["failures"] == [None, None]


# ------------------------------------------------------------------------------------ 4
async def ordered_scenario(seed: int = 878) -> tuple:
    """Producers run throughout; 3 instances; the input goes 4 -> 8 and one instance restarts."""
    rng = random.Random(seed)
    async with Cluster(brokers=3, seed=seed, group_initial_rebalance_delay_ms=0) as cluster:
        await cluster.create_topic("input", 4)
        await cluster.create_topic("output", 4)
        admin = Admin(cluster.bootstrap)
        cfg = config()
        apps = [KafkaStreams(topology(), cluster.bootstrap, {**cfg, "client.id": f"app-{i}"})
                for i in range(3)]
        for app in apps:
            await app.start()
        stop = asyncio.Event()
        producer = Producer(cluster.bootstrap, linger_ms=2, retry_backoff_ms=20)
        await producer.start()
        feed = Feed(producer)
        keys = [b"k%02d" % i for i in range(24)]

        async def produce() -> None:
            futs = []
            while not stop.is_set():
                k = rng.choice(keys)
                s = feed.seq[k]
                feed.seq[k] += 1
                f = producer.send("input", b"%d" % s, key=k)
                f.add_done_callback(lambda f, k=k, s=s: f.exception() is None and
                                    feed.history.ack(k, s, f.result().partition, f.result().offset))
                futs.append(f)
                await asyncio.sleep(rng.uniform(0.01, 0.03))
            await asyncio.gather(*futs, return_exceptions=True)

        # A downstream KIP-253 group reads the output as an application would.
        reader = Consumer(cluster.bootstrap, group_id="output-reader", client_id="reader",
                          auto_offset_reset="earliest", heartbeat_interval_ms=100,
                          fetch_max_wait_ms=50, metadata_max_age_ms=500, retry_backoff_ms=50)
        reader.subscribe(["output"])
        done = asyncio.Event()

        async def read() -> None:
            while not done.is_set():
                for r in await reader.poll(0.1):
                    feed.history.deliver("reader", r.key, int(r.value.split(b":")[1]),
                                         r.partition, r.offset)

        tasks = [asyncio.ensure_future(produce()), asyncio.ensure_future(read())]
        loop = asyncio.get_running_loop()
        t0, r0 = loop.time(), time.monotonic()
        await asyncio.sleep(3)
        await admin.create_partitions({"output": 8})
        feed.history.expansions += 1
        await asyncio.sleep(1)
        await admin.create_partitions({"input": 8})
        feed.history.expansions += 1
        await asyncio.sleep(0.5)
        # instance 1 restarts while the group expands
        await apps[1].close()
        await asyncio.sleep(1)
        apps[1] = KafkaStreams(topology(), cluster.bootstrap, {**cfg, "client.id": "app-1b"})
        await apps[1].start()
        async def expanded() -> bool:
            return (await widths(admin, *INTERNAL)) == {REPARTITION: 8, CHANGELOG: 8}
        end = loop.time() + 60
        while not await expanded():
            assert loop.time() < end, ("internal topics not expanded", await widths(
                admin, *INTERNAL), [(a.client_id, a.state, a.error, a.autoscaler.attempts)
                                    for a in apps])
            await asyncio.sleep(0.5)
        print(f"expanded at virtual {loop.time() - t0:.1f}s real {time.monotonic() - r0:.1f}s")
        await asyncio.sleep(4)
        stop.set()
        await tasks[0]
        # everything acknowledged has come out the other end
        acked = {(k, s) for k, s, _, _ in feed.history.produced}
        await until(lambda: acked <= {(k, s) for _, k, s, _, _ in feed.history.delivered}, 60,
                    "the output to catch up", step=0.5)
        print(f"virtual {loop.time() - t0:.1f}s real {time.monotonic() - r0:.1f}s")
        done.set()
        await tasks[1]
        widths_after = await widths(admin, "input", *INTERNAL)
        states = [a.state for a in apps]
        for app in apps:
            await app.close()
        await reader.close()
        await producer.stop()
        await admin.close()
        return feed.history.check(), widths_after, states


def test_ordered_delivery_through_the_app_with_three_instances_and_a_restart():
    report, widths_after, states = run(ordered_scenario())
    print(f"ordered: {report.summary()} widths={widths_after} states={states}")
    assert widths_after == {"input": 8, REPARTITION: 8, CHANGELOG: 8}
    assert states == ["RUNNING"] * 3
    assert report.violations == 0 and report.losses == 0, f"{report.summary()} {report.examples}"
    assert report.records > 400 and report.keys == 24


async def over_partitioned_scenario() -> dict:
    async with Cluster(brokers=1, group_initial_rebalance_delay_ms=0) as cluster:
        await cluster.create_topic("input", 4)
        await cluster.create_topic("output", 4)
        await cluster.create_topic(REPARTITION, 8)          # wider than its source: a user error
        app = KafkaStreams(topology(), cluster.bootstrap, config())
        await app.start()
        await until(lambda: app.state == "ERROR", 30, "the app to fail")
        admin = Admin(cluster.bootstrap)
        out = dict(error=app.error, widths=await widths(admin, *INTERNAL),
                   attempts=app.autoscaler.attempts)
        await app.close()
        await admin.close()
        return out


def test_an_over_partitioned_internal_topic_is_an_error():
    from minibroker.client.streams import AssignmentError
    r = run(over_partitioned_scenario())
    assert isinstance(r["error"], AssignmentError) and REPARTITION in str(r["error"]), r
    assert r["widths"] == {REPARTITION: 8, CHANGELOG: 4} and r["attempts"] == 0
