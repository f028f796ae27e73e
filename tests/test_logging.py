"""What the broker logs: INFO names topic, partition-count, config and leader changes and group
rebalances, one line each (no line per empty __consumer_offsets partition); DEBUG names every
request; a clean shutdown logs no WARNING."""
from __future__ import annotations

import asyncio
import logging
import re

import pytest
from kafka.protocol.metadata import MetadataRequest

from minibroker.client import Admin, Consumer, Producer
from minibroker.cluster import Cluster
from minibroker.network.client import KafkaClientConnection

pytestmark = pytest.mark.timeout(60)


def info_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.INFO and r.name.startswith("minibroker")]


async def test_info_lines_one_per_change_and_a_quiet_shutdown(caplog):
    caplog.set_level(logging.INFO, logger="minibroker")
    cluster = Cluster(brokers=3, group_initial_rebalance_delay_ms=0)
    await cluster.start()
    await cluster.create_topic("logged", partitions=3, replication_factor=3)
    async with Producer(cluster.bootstrap) as producer:
        await asyncio.gather(*[producer.send("logged", b"%d" % i, partition=i % 3)
                               for i in range(9)])
    c = Consumer(cluster.bootstrap, group_id="watchers", auto_offset_reset="earliest",
                 heartbeat_interval_ms=100, fetch_max_wait_ms=50)
    c.subscribe(["logged"])
    got, loop = [], asyncio.get_running_loop()
    end = loop.time() + 20
    while len(got) < 9 and loop.time() < end:
        got += await c.poll(0.2)
    assert len(got) == 9
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_partitions({"logged": 4})
        await admin.alter_configs({(2, "logged"): {"retention.ms": "60000"}})
    leader = await cluster.leader_of("logged", 0)
    new_leader = next(b for b in (1, 2, 3) if b != leader)
    await cluster.move_leader("logged", 0, new_leader)
    await c.close()
    await cluster.stop()

    lines = info_lines(caplog)
    created = [ln for ln in lines if ln.startswith("controller: created topic logged ")]
    assert created == ["controller: created topic logged with 3 partitions, replication factor 3"]
    assert sum("created topic __consumer_offsets" in ln for ln in lines) == 1
    assert [ln for ln in lines if "topic logged now has" in ln] == [
        "controller: topic logged now has 4 partitions (added [3], removed none)"]
    assert [ln for ln in lines if "topic logged configs now" in ln] == [
        "controller: topic logged configs now {'retention.ms': '60000'}"]
    assert f"0: {leader} -> {new_leader}" in next(
        ln for ln in lines if ln.startswith("controller: new leaders of logged:"))
    joins = [ln for ln in lines if ln.startswith("Preparing to rebalance group watchers ")]
    stable = [ln for ln in lines if ln.startswith("Stabilized group watchers ")]
    assert joins and re.search(r"with old generation 0 \(__consumer_offsets-\d+\) \(reason: ",
                               joins[0]), joins
    assert stable and stable[0].endswith("with 1 members"), stable
    # 50 empty __consumer_offsets partitions loaded at start: not one INFO line about them.
    assert not [ln for ln in lines if "loaded __consumer_offsets" in ln and "(0 groups)" in ln]
    assert len(lines) < 40, "\n".join(lines)
    warnings = [f"{r.name}: {r.getMessage()}" for r in caplog.records
                if r.levelno >= logging.WARNING]
    assert warnings == []


async def test_debug_names_every_request(caplog, cluster):
    caplog.set_level(logging.DEBUG, logger="minibroker.dispatch")
    b = cluster.brokers[1]
    conn = await KafkaClientConnection.connect(b.host, b.port, client_id="probe-7")
    try:
        for corr in range(3):
            await conn.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    finally:
        conn.close()
    lines = [r.getMessage() for r in caplog.records
             if r.name == "minibroker.dispatch" and "probe-7" in r.getMessage()]
    metadata = [ln for ln in lines if " Metadata v12 " in ln]
    assert len(metadata) == 3, lines
    ids = [int(re.search(r"correlation id (\d+):", ln).group(1)) for ln in metadata]
    assert len(set(ids)) == 3
    assert all(re.search(r"broker 1: Metadata v12 from client probe-7, correlation id \d+: "
                         r"\d+\.\d ms$", ln) for ln in metadata), metadata
