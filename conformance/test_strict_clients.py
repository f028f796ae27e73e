"""`serve --strict`: the four real clients, used correctly, break no protocol rule.

Each client runs the produce/consume round trip (idempotent), the three-member consumer group
scenario of test_groups.py (join, rebalance on leave, commits, a new member resuming at the
commits) and the transaction scenario of test_transactions.py (commit, abort, fencing), against a
`serve --strict --trace FILE` cluster; the violations recorded while it ran (the trace lines
carry them) must be none, except those listed in KNOWN with the client source line that shows
the behaviour is that client's own.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
import time
import zlib

import pytest

from conformance import checks
from conformance.conftest import served_cluster
from conformance.drivers import load
from conformance.test_groups import (check_scenario, run_kafkajs_scenario, run_python_scenario,
                                     _batches)
from conformance.test_transactions import PRODUCERS, _create

pytestmark = pytest.mark.timeout(300)

CLIENTS = ("confluent", "kafka_python", "aiokafka", "kafkajs")
IO_TIMEOUT = 30.0

# (client, rule) → why it is the client's real behaviour, with its source line. Empty: none
# of the four breaks a rule in these scenarios.
KNOWN: dict[tuple[str, str], str] = {}


@pytest.fixture(scope="module")
def strict_served():
    fd, path = tempfile.mkstemp(prefix="minibroker-strict-", suffix=".jsonl")
    os.close(fd)
    cmd = (f"{shlex.quote(sys.executable)} -m minibroker serve --brokers 3 --port 0 --strict "
           f"--trace {shlex.quote(path)} --override group.initial.rebalance.delay.ms=0")
    with served_cluster(cmd) as cluster:
        cluster.trace_path = path
        yield cluster
    os.unlink(path)


def _lines(path: str, start: int) -> list[dict]:
    with open(path, "rb") as f:
        f.seek(start)
        return [json.loads(x) for x in f.read().splitlines() if x.strip()]


def _settled_lines(path: str, start: int, quiet_s: float = 0.5, limit_s: float = 15.0
                   ) -> list[dict]:
    """The lines from `start` once the trace stops growing: the server writes its lines up to
    0.1 s late (trace.FLUSH_S), and the client's last exchanges end well inside that."""
    size, since, deadline = -1, time.monotonic(), time.monotonic() + limit_s
    while time.monotonic() < deadline:
        now = os.path.getsize(path)
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        time.sleep(0.05)
    return _lines(path, start)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_correct_client_breaks_no_rule(strict_served, client):
    d = load(client)
    why = d.available() if hasattr(d, "available") else None
    if why:
        pytest.fail(f"{client}: {why}")
    cluster, bs = strict_served, strict_served.bootstrap
    start = os.path.getsize(cluster.trace_path)
    # 1. produce (idempotent) and read back
    topic = cluster.topic_name(f"strict-{client}")
    admin = d if d.HAS_ADMIN else load("kafka_python")
    admin.create_topic(bs, topic, 3, cluster.replication, timeout=IO_TIMEOUT)
    records = checks.make_records(90, zlib.crc32(topic.encode()))
    produced = d.produce(bs, topic, records, "none", acks="all",
                         idempotent=getattr(d, "HAS_IDEMPOTENCE", False), timeout=60)
    consumed = d.consume_assigned(bs, topic, [0, 1, 2], len(records), timeout=IO_TIMEOUT)
    checks.check_readback(records, produced, consumed, 3)
    # 2. the consumer group scenario
    gtopic = cluster.topic_name(f"strict-groups-{client}")
    admin.create_topic(bs, gtopic, 6, cluster.replication, timeout=IO_TIMEOUT)
    batches = _batches(client)
    run = run_kafkajs_scenario if client == "kafkajs" else run_python_scenario
    check_scenario(run(d, bs, gtopic, f"{gtopic}-group", batches))
    # 3. transactions: commit, abort, fencing
    ttopic = cluster.topic_name(f"strict-txn-{client}")
    _create(bs, ttopic, cluster.replication)
    PRODUCERS[client](bs, ttopic, f"tid-{ttopic}")
    lines = _settled_lines(cluster.trace_path, start)
    # What strict mode judged: every API its rules look at went by.
    seen = {r["api"] for r in lines if r["dir"] == "request"}
    assert {"ApiVersions", "Metadata", "Produce", "Fetch", "FindCoordinator", "JoinGroup",
            "SyncGroup", "Heartbeat", "OffsetCommit", "InitProducerId", "AddPartitionsToTxn",
            "EndTxn"} <= seen, seen
    assert any(b["producer_id"] >= 0 for r in lines if r["api"] == "Produce" and
               r["dir"] == "request" for t in r["fields"]["topic_data"]
               for p in t["partition_data"] for b in p["records"] or [])
    found = [v for r in lines for v in r.get("violations", ()) if (client, v["rule"]) not in KNOWN]
    assert found == [], "\n".join(json.dumps(v) for v in found)
