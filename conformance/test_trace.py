"""`serve --trace FILE` with a real client: confluent-kafka produces idempotently and consumes in a
consumer group; FILE then holds one line per request and per response, the Produce lines carry
the batch summaries and librdkafka's software name, and `minibroker trace FILE --api Produce`
prints them."""
from __future__ import annotations

import collections
import json
import shlex
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer

from conformance.conftest import served_cluster
from conformance.drivers import load

pytestmark = [pytest.mark.timeout(120), pytest.mark.clients("confluent")]

N = 50


def test_serve_trace_with_confluent_kafka(tmp_path):
    path = tmp_path / "trace.jsonl"
    cmd = (f"{shlex.quote(sys.executable)} -m minibroker serve --brokers 1 --port 0 "
           f"--trace {shlex.quote(str(path))} --override group.initial.rebalance.delay.ms=0")
    with served_cluster(cmd, replication=1) as cluster:
        bs = cluster.bootstrap
        load("kafka_python").create_topic(bs, "traced", 1, 1)
        p = Producer({"bootstrap.servers": bs, "client.id": "traced-producer",
                      "enable.idempotence": True, "linger.ms": 5, "compression.type": "lz4"})
        for i in range(N):
            p.produce("traced", key=b"k%d" % i, value=b"v%d" % i)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": bs, "client.id": "traced-consumer",
                      "group.id": "traced-group", "group.protocol": "classic",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["traced"])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < N and time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=0.5):
                assert not m.error(), m.error()
                got.append(m.value())
        c.commit(asynchronous=False)
        c.close()
        assert len(got) == N
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    # One request line and one response line per (broker, connection, correlation id).
    by_exchange = collections.Counter((r["broker"], r["conn"], r["corr"], r["dir"])
                                      for r in lines if r["dir"] in ("request", "response"))
    requests = {k[:3] for k in by_exchange if k[3] == "request"}
    responses = {k[:3] for k in by_exchange if k[3] == "response"}
    assert set(by_exchange.values()) == {1} and requests == responses
    produce = [r for r in lines if r["api"] == "Produce" and r["dir"] == "request"]
    assert produce and all(r["client_id"] == "traced-producer" for r in produce)
    assert all(r["software"].startswith("confluent-kafka-python/") or
               r["software"].startswith("librdkafka/") for r in produce), produce[0]["software"]
    batches = [b for r in produce for t in r["fields"]["topic_data"]
               for p in t["partition_data"] for b in p["records"]]
    assert sum(b["count"] for b in batches) == N
    assert all(b["producer_id"] >= 0 and b["codec"] == "lz4" for b in batches)
    assert [b["base_sequence"] for b in batches][0] == 0
    apis = {r["api"] for r in lines if r.get("client_id") == "traced-consumer"}
    assert {"FindCoordinator", "JoinGroup", "SyncGroup", "Fetch", "OffsetCommit"} <= apis
    out = subprocess.run([sys.executable, "-m", "minibroker", "trace", str(path), "--api",
                          "Produce"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.count("→ Produce") == len(produce) and "traced[0] @0" in out and "lz4" in out
    assert "Fetch" not in out
