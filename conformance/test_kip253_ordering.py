"""KIP-253 end to end: keyed records stay in order per key while the topic goes N -> 2N -> 3N -> N
(-> 2N again), with a 3-member reference-consumer group consuming throughout (members joining
and leaving), lagging behind the producers so new partitions open while their parents still have
a backlog.

In-process Cluster on a virtual-time loop (seeded: producers' keys and pacing, the consumers'
pace; set KIP253_SEED to replay one). The checker (conformance/kip253_checker.py) reads the whole
produced and delivered history.  With `ordering_barrier=False` the same scenario must show
violations (the negative control); with the barrier, none and no losses — also when the
controller stops in the middle of an expansion and of a deletion: at a fault site, and by
stopping the broker that hosts it right after step 1 is committed (a real stop; the broker is
started again once the next controller answered).
Stock clients (kafka-python, confluent-kafka) keep producing and consuming on such a topic.
"""
from __future__ import annotations

import asyncio
import os
import random
import time

import pytest

from conformance.kip253_checker import History, Report
from conformance import rdlog
from conformance.rdlog import LOG
from minibroker.client import Admin, Consumer, Producer, TopicPartition
from minibroker.cluster import Cluster
from minibroker.testing.virtual_time import VirtualTimeLoop

pytestmark = pytest.mark.timeout(120)

SEED = int(os.environ.get("KIP253_SEED", "1253"))
TOPIC = "orders"
GROUP = "kip253-group"
N = 2
FAULT_SITE = "controller.partition_count.step1"


async def _topic_state(admin: Admin, topic: str = TOPIC) -> tuple[int, list[int]]:
    await admin.metadata.refresh([topic])
    md = admin.metadata.topic(topic)
    return md.undeleted_partition_count, sorted(md.partitions)


async def _wait_state(admin: Admin, undeleted: int, partitions: int, timeout: float = 20.0,
                      topic: str = TOPIC) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        try:
            u, ps = await _topic_state(admin, topic)
            if u == undeleted and len(ps) == partitions:
                return
        except Exception:  # noqa: BLE001 - a controller failover in progress
            pass
        await asyncio.sleep(0.05)
    raise AssertionError(f"{topic} never reached {undeleted}/{partitions}")


async def _stop_host_after_step1(cluster: Cluster, count: int):
    """A task stopping the broker that hosts the controller once step 1 of changing the count to
    `count` is committed (expansion: the count record and an epoch bump per partition)."""
    t = (await cluster.active_controller()).image.topics[TOPIC]
    step1 = 1 + (len(t.partitions) if count > t.undeleted_partition_count else 0)
    committed = cluster.quorum.wait_committed(len(cluster.metadata_log) + step1)

    async def stop() -> int:
        await committed
        host = cluster.controller_node_id
        await cluster.stop_broker(host)
        return host
    return asyncio.ensure_future(stop())


async def _alter(cluster: Cluster, admin: Admin, count: int, fault: bool | str) -> None:
    """fault: False, True (the fault site after step 1) or "stop" (a real stop there)."""
    stopper = await _stop_host_after_step1(cluster, count) if fault == "stop" else None
    if fault is True:
        cluster.faults.enable(FAULT_SITE)
    failed = False
    try:
        await admin.create_partitions({TOPIC: count})
    except Exception:  # noqa: BLE001 - the controller halted after step 1 (fault)
        failed = True
    finally:
        if fault is True:
            cluster.faults.disable(FAULT_SITE)
        if stopper is not None:
            await cluster.start_broker(await stopper)
    assert failed == bool(fault), "the change was not split by the fault" if fault else \
        "create_partitions failed"


async def scenario(seed: int, barrier: bool = True,
                   controller_faults: bool | str = False) -> Report:
    rng = random.Random(seed)
    history = History()
    async with Cluster(brokers=3, seed=seed, group_initial_rebalance_delay_ms=0,
                       partition_deletion_check_interval_ms=200) as cluster:
        await cluster.create_topic(TOPIC, N, 2)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        stop_producing = asyncio.Event()
        admin = Admin(cluster.bootstrap)
        offsets_reader = Consumer(cluster.bootstrap, group_id=GROUP, enable_auto_commit=False)

        # ---------------------------------------------------------------- producers
        async def produce(i: int) -> None:
            prng = random.Random(rng.random())
            keys = [b"p%d-k%02d" % (i, j) for j in range(8)]
            seq = {k: 0 for k in keys}
            async with Producer(cluster.bootstrap, linger_ms=2, retry_backoff_ms=20) as p:
                futs = []
                while not stop_producing.is_set():
                    k = prng.choice(keys)
                    s = seq[k]
                    seq[k] += 1
                    fut = p.send(TOPIC, b"%d" % s, key=k)
                    fut.add_done_callback(
                        lambda f, k=k, s=s: f.exception() is None and
                        history.ack(k, s, f.result().partition, f.result().offset))
                    futs.append(fut)
                    await asyncio.sleep(prng.uniform(0.02, 0.04))
                await asyncio.gather(*futs, return_exceptions=True)

        # ---------------------------------------------------------------- consumers
        members: dict[str, Consumer] = {}

        async def consume(name: str, start: float, stop: float | None) -> None:
            crng = random.Random(rng.random())
            await asyncio.sleep(start)
            c = Consumer(cluster.bootstrap, group_id=GROUP, client_id=name,
                         auto_offset_reset="earliest", heartbeat_interval_ms=100,
                         session_timeout_ms=6000, fetch_max_wait_ms=50, max_poll_records=8,
                         auto_commit_interval_ms=200, metadata_max_age_ms=500,
                         retry_backoff_ms=50, ordering_barrier=barrier)
            members[name] = c
            c.subscribe([TOPIC])
            try:
                while stop is None or loop.time() - t0 < stop:
                    for r in await c.poll(0.05):
                        history.deliver(name, r.key, int(r.value), r.partition, r.offset)
                    # Slower than the producers until the second expansion (a backlog on the
                    # parents when new partitions open), then faster (they catch up).
                    slow = loop.time() - t0 < 6.0
                    await asyncio.sleep(crng.uniform(0.2, 0.3) if slow else crng.uniform(0.01, 0.03))
                    if stop is None and done.is_set():
                        break
            finally:
                await c.close()
                members.pop(name, None)

        # ---------------------------------------------------------------- topic changes
        async def drain_marked() -> None:
            """DeleteRecords on each marked partition up to the group's committed offset."""
            while True:
                u, parts = await _topic_state(admin)
                marked = [p for p in parts if p >= u]
                if not marked:
                    return
                for p in marked:
                    tp = TopicPartition(TOPIC, p)
                    try:
                        committed = await offsets_reader.committed(tp)
                        if committed:
                            await admin.delete_records({tp: committed})
                    except Exception:  # noqa: BLE001 - leader moves, failover: next round
                        pass
                if os.environ.get("KIP253_DEBUG"):
                    _debug(loop.time() - t0, members, u, parts)
                await asyncio.sleep(0.3)

        async def alter_topic() -> None:
            await asyncio.sleep(3.0)
            await _alter(cluster, admin, 2 * N, False)
            history.expansions += 1
            await _wait_state(admin, 2 * N, 2 * N)
            await asyncio.sleep(2.5)
            await _alter(cluster, admin, 3 * N, controller_faults)
            history.expansions += 1
            await _wait_state(admin, 3 * N, 3 * N)
            await asyncio.sleep(3.0)
            await _alter(cluster, admin, N, controller_faults)
            history.deletions += 1
            await _wait_state(admin, N, 3 * N)
            await drain_marked()
            await _wait_state(admin, N, N, timeout=60)
            await _alter(cluster, admin, 2 * N, False)
            history.expansions += 1
            await _wait_state(admin, 2 * N, 2 * N)
            await asyncio.sleep(2.0)

        done = asyncio.Event()
        producers = [asyncio.ensure_future(produce(i)) for i in range(3)]
        consumers = [asyncio.ensure_future(consume("m1", 1.5, None)),
                     asyncio.ensure_future(consume("m2", 1.5, 7.0)),
                     asyncio.ensure_future(consume("m3", 4.0, None)),
                     asyncio.ensure_future(consume("m4", 8.0, None))]
        try:
            await asyncio.wait_for(alter_topic(), 120)
            stop_producing.set()
            await asyncio.gather(*producers)
            # Until every acknowledged record was delivered (or a generous deadline).
            end = loop.time() + 60
            while loop.time() < end:
                if not history.check().losses:
                    break
                await asyncio.sleep(0.5)
            done.set()
            await asyncio.gather(*consumers)
        finally:
            stop_producing.set()
            done.set()
            for t in producers + consumers:
                t.cancel()
            await asyncio.gather(*producers, *consumers, return_exceptions=True)
            await offsets_reader.close()
            await admin.close()
    return history.check()


def _debug(t, members, u, parts) -> None:
    print(f"t={t:.1f} U={u} parts={parts}")
    for name, c in sorted(members.items()):
        print(f"  {name} gen={c.generation_id} joined={c._joined} rejoin={c._rejoin} "
              f"asked={sorted(tp.partition for tp in c._ordering.asked)} "
              f"group_pos={ {tp.partition: v for tp, v in c._ordering.group_positions.items()} }")
        for tp, st in c._parts.items():
            b = c._ordering.barriers.get(tp)
            print(f"    p{tp.partition} pos={st.position} fetch={st.fetch_offset} hw={st.high_watermark} "
                  f"gate={st.gate} buf={len(st.buffer)} committed={st.committed} "
                  f"barrier={None if b is None else (b.ready, b.opened, b.parent, b.lower_end, dict(b.blockers))}")


def run(seed: int, **kw) -> Report:
    loop = VirtualTimeLoop(real_time_limit=100)
    try:
        return loop.run_until_complete(scenario(seed, **kw))
    finally:
        loop.close()


def test_ordered_delivery_through_expansions_and_deletion():
    r = run(SEED)
    print(f"seed={SEED} barrier=on: {r.summary()}")
    assert r.violations == 0 and r.losses == 0, f"seed={SEED}: {r.summary()} {r.examples}"
    assert r.expansions == 3 and r.deletions == 1 and r.records > 500 and r.keys == 24, \
        f"seed={SEED}: {r.summary()}"


def test_negative_control_without_the_barrier_shows_violations():
    r = run(SEED, barrier=False)
    print(f"seed={SEED} barrier=off: {r.summary()} e.g. {r.examples[:2]}")
    assert r.violations > 0, f"seed={SEED}: {r.summary()}"


def test_controller_stopped_mid_expansion_and_mid_deletion():
    r = run(SEED, controller_faults=True)
    print(f"seed={SEED} barrier=on, controller faults: {r.summary()}")
    assert r.violations == 0 and r.losses == 0, f"seed={SEED}: {r.summary()} {r.examples}"
    assert r.expansions == 3 and r.deletions == 1, f"seed={SEED}: {r.summary()}"


def test_controllers_broker_stopped_mid_expansion_and_mid_deletion():
    r = run(SEED, controller_faults="stop")
    print(f"seed={SEED} barrier=on, controller's broker stopped between steps: {r.summary()}")
    assert r.violations == 0 and r.losses == 0, f"seed={SEED}: {r.summary()} {r.examples}"
    assert r.expansions == 3 and r.deletions == 1, f"seed={SEED}: {r.summary()}"


@pytest.mark.clients("confluent")
def test_stock_clients_unaffected_by_expansion_and_deletion():
    """kafka-python and confluent-kafka send no counts: their Produce and Fetch are not compared.
    They keep producing (to partitions below U) and consuming every partition, marked ones too,
    while the topic grows and shrinks and the reference producer writes with linear hashing."""
    import confluent_kafka
    import kafka

    from minibroker.testing.threaded import ThreadedCluster

    topic = "stock-kip253"
    with ThreadedCluster(brokers=3, group_initial_rebalance_delay_ms=0,
                         partition_deletion_check_interval_ms=60000) as tc:
        c = tc.cluster
        tc.call(c.create_topic, topic, N, 2)
        kp = kafka.KafkaProducer(bootstrap_servers=tc.bootstrap, acks="all",
                                 metadata_max_age_ms=200)
        cp = confluent_kafka.Producer({"bootstrap.servers": tc.bootstrap,
                                       "topic.metadata.refresh.interval.ms": 200,
                                       "logger": LOG})
        sent: list[tuple[int, bytes]] = []

        def stock_round(tag: bytes, undeleted: int) -> None:
            deadline = time.monotonic() + 20          # until both see the topic's partitions
            while time.monotonic() < deadline and not (
                    len(kp.partitions_for(topic) or ()) >= undeleted and
                    len(cp.list_topics(topic, timeout=5).topics[topic].partitions) >= undeleted):
                time.sleep(0.1)
            for i in range(10):
                p = i % undeleted
                v = b"%s-kp-%d" % (tag, i)
                kp.send(topic, v, partition=p).get(timeout=20)
                sent.append((p, v))
                v = b"%s-cp-%d" % (tag, i)
                cp.produce(topic, v, partition=p)
                sent.append((p, v))
            assert cp.flush(20) == 0

        async def ours(tag: bytes) -> None:
            async with Producer(tc.bootstrap) as p:
                for m in await asyncio.gather(*[p.send(topic, b"%s-mb-%d" % (tag, i),
                                                       key=b"k%d" % i) for i in range(10)]):
                    sent.append((m.partition, None))

        async def alter(count: int, partitions: int) -> None:
            async with Admin(tc.bootstrap) as admin:
                await admin.create_partitions({topic: count})
                await _wait_state(admin, count, partitions, topic=topic)

        stock_round(b"a", N)
        tc.call(ours, b"a")
        tc.call(alter, 2 * N, 2 * N)
        stock_round(b"b", 2 * N)
        tc.call(ours, b"b")
        tc.call(alter, 3 * N, 3 * N)
        stock_round(b"c", 3 * N)
        tc.call(alter, N, 3 * N)              # 2..5 marked, kept (not drained)
        stock_round(b"d", N)                # below U: accepted as before
        tc.call(ours, b"d")
        kp.close()

        want = sorted(v for _, v in sent if v is not None)
        kc = kafka.KafkaConsumer(topic, bootstrap_servers=tc.bootstrap, group_id="stock-kp",
                                 auto_offset_reset="earliest", consumer_timeout_ms=3000,
                                 metadata_max_age_ms=200)
        got_kp = sorted(m.value for m in kc if b"-mb-" not in m.value)
        kc.close()
        cc = confluent_kafka.Consumer({"bootstrap.servers": tc.bootstrap, "group.id": "stock-cp",
                                       "auto.offset.reset": "earliest", "logger": LOG})
        cc.subscribe([topic])
        got_cp: list[bytes] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(got_cp) < len(want):
            m = cc.poll(0.2)
            if m is not None and m.error() is None and b"-mb-" not in m.value():
                got_cp.append(m.value())
        cc.close()
        del cp
        print(f"stock clients: {len(want)} records from kafka-python and confluent-kafka, read "
              f"back by each ({len(got_kp)}, {len(got_cp)}) across 2 expansions and 1 deletion")
        assert got_kp == want
        assert sorted(got_cp) == want


@pytest.mark.clients("confluent")
def test_stock_consumer_reads_a_recreated_partition_from_its_start():
    """N -> 2N -> N (drained, removed) -> 2N while a librdkafka consumer holds the removed
    partition's end offset: the new incarnation starts one leader epoch higher, so the consumer's
    fetch at the old offset is fenced and its OffsetForLeaderEpoch shows the truncation; it reads
    the new log from offset 0 instead of skipping the records below its old position. Fetch errors
    meanwhile (the partition gone, then fenced) carry empty records, which librdkafka parses
    (conftest also fails any test with a librdkafka protocol error)."""
    import confluent_kafka

    from minibroker.testing.threaded import ThreadedCluster

    topic = "recreated"
    with ThreadedCluster(brokers=3, partition_deletion_check_interval_ms=100) as tc:
        tc.call(tc.cluster.create_topic, topic, 1, 3)

        def produce(tag: str, n: int) -> None:
            p = confluent_kafka.Producer({"bootstrap.servers": tc.bootstrap, "acks": "all",
                                          "logger": LOG})
            for i in range(n):
                p.produce(topic, f"{tag}{i}".encode(), partition=1)
            assert p.flush(20) == 0

        def poll(c, n: int, timeout: float) -> list[tuple[int, bytes]]:
            got: list[tuple[int, bytes]] = []
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and len(got) < n:
                m = c.poll(0.1)
                if m is not None and m.error() is None:
                    got.append((m.offset(), m.value()))
            return got

        async def alter(count: int, partitions: int, drain: bool = False) -> None:
            async with Admin(tc.bootstrap) as admin:
                await admin.create_partitions({topic: count})
                if drain:
                    await admin.delete_records({TopicPartition(topic, 1): 3})
                await _wait_state(admin, count, partitions, topic=topic)

        tc.call(alter, 2, 2)
        produce("old", 3)
        c = confluent_kafka.Consumer({"bootstrap.servers": tc.bootstrap, "group.id": "recreated",
                                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                      "topic.metadata.refresh.interval.ms": 500, "logger": LOG})
        c.assign([confluent_kafka.TopicPartition(topic, 1, 0)])
        try:
            assert poll(c, 3, 20) == [(0, b"old0"), (1, b"old1"), (2, b"old2")]
            tc.call(alter, 1, 1, True)          # marked, drained and removed
            tc.call(alter, 2, 2)                # created again ...
            produce("new", 5)                   # ... and past the old position before a fetch
            got = poll(c, 5, 20)
        finally:
            c.close()
    assert got == [(i, b"new%d" % i) for i in range(5)], got
    assert not rdlog.take()                 # no response librdkafka could not parse
