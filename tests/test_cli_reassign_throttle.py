"""`reassign-partitions --throttle` slows a move to about the rate asked, `--verify` then clears
the throttle, and `--cancel` leaves the partition on its old replicas: a served cluster, the
data written and read back with kafka-python."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(240)]
RECORDS, VALUE_BYTES = 40, 50_000                 # ~2 MB in one partition
FETCH_MAX = 65_536                                # replica.fetch.max.bytes: small steps


@pytest.fixture
def served():
    p = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "3",
                          "--port", "0", "--override", f"replica.fetch.max.bytes={FETCH_MAX}"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("BOOTSTRAP "), line + p.stderr.read()
        yield line.split()[1]
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(15) == 0


def cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minibroker", *args[:1], "--bootstrap-server",
                           bootstrap, *args[1:]], capture_output=True, text=True, timeout=60)


def filled_topic(bootstrap: str, topic: str) -> tuple[int, int]:
    """A one-replica topic holding RECORDS records; (its broker, another broker)."""
    r = cli(bootstrap, "topics", "--create", "--topic", topic, "--partitions", "1",
            "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, max_request_size=1 << 20)
    for i in range(RECORDS):
        producer.send(topic, bytes([i]) * VALUE_BYTES, partition=0)
    producer.flush(30)
    producer.close()
    leader = replicas(bootstrap, topic)[0]
    return leader, next(b for b in (1, 2, 3) if b != leader)


def replicas(bootstrap: str, topic: str) -> list[int]:
    out = cli(bootstrap, "topics", "--describe", "--topic", topic).stdout
    return [int(b) for b in out.split("Replicas: ")[1].split()[0].split(",")]


def plan(tmp_path, topic: str, target: list[int]) -> str:
    path = tmp_path / f"{topic}.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": target}]}))
    return str(path)


def moved_after(admin: KafkaAdminClient, topic: str, target: list[int], start: float) -> float:
    """Seconds from `start` until the metadata shows `topic` on exactly `target`, all in sync
    (polled every 50 ms through kafka-python's admin client; bounded)."""
    while time.monotonic() - start < 120:
        [t] = admin.describe_topics([topic])
        [p] = t["partitions"]
        if p["replica_nodes"] == target and sorted(p["isr_nodes"]) == sorted(target):
            return time.monotonic() - start
        time.sleep(0.05)
    raise AssertionError(f"{topic} did not move to {target} in 120 s")


def read_all(bootstrap: str, topic: str) -> list[bytes]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      fetch_max_bytes=1 << 22)
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got, deadline = [], time.monotonic() + 30
    while len(got) < RECORDS and time.monotonic() < deadline:
        got += [r.value for rs in c.poll(500).values() for r in rs]
    c.close()
    return got


def test_throttle_slows_the_move_and_verify_clears_it(served, tmp_path):
    size = RECORDS * VALUE_BYTES
    admin = KafkaAdminClient(bootstrap_servers=served)
    # Unthrottled, for comparison.
    src, dst = filled_topic(served, "fast")
    start = time.monotonic()
    r = cli(served, "reassign-partitions", "--execute", "--reassignment-json-file",
            plan(tmp_path, "fast", [src, dst]))
    assert r.returncode == 0, r.stderr
    fast = moved_after(admin, "fast", [src, dst], start)

    rate = 200_000                                # bytes/s, a tenth of the data
    src, dst = filled_topic(served, "slow")
    path = plan(tmp_path, "slow", [src, dst])
    start = time.monotonic()
    r = cli(served, "reassign-partitions", "--execute", "--reassignment-json-file", path,
            "--throttle", str(rate))
    assert r.returncode == 0, r.stderr
    assert f"The inter-broker throttle limit was set to {rate} B/s" in r.stdout
    # Kafka's configs, as kafka-configs.sh shows them.
    r = cli(served, "configs", "--describe", "--entity-type", "brokers", "--entity-name", str(dst))
    assert f"follower.replication.throttled.rate={rate} " in r.stdout, r.stdout + r.stderr
    assert "synonyms={DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=" in r.stdout
    r = cli(served, "configs", "--describe", "--entity-type", "topics", "--entity-name", "slow")
    assert f"follower.replication.throttled.replicas=0:{dst} " in r.stdout, r.stdout
    assert f"leader.replication.throttled.replicas=0:{src} " in r.stdout, r.stdout
    done = moved_after(admin, "slow", [src, dst], start)
    admin.close()
    # The bucket holds one second's bytes and a fetch may overdraw it once: at most
    # rate * (t + 1) + FETCH_MAX bytes can have moved by time t.
    floor = (size - rate - FETCH_MAX) / rate
    assert done >= floor, (done, floor)
    assert fast < done, (fast, done)
    print(f"unthrottled {size} B in {fast:.2f} s; at {rate} B/s in {done:.2f} s "
          f"({size / done:.0f} B/s, floor {floor:.1f} s)")
    r = cli(served, "reassign-partitions", "--verify", "--reassignment-json-file", path)
    assert "Reassignment of partition slow-0 is completed." in r.stdout, r.stdout
    assert "Clearing broker-level throttles on brokers 1,2,3" in r.stdout, r.stdout
    assert "Clearing topic-level throttles on topic slow" in r.stdout
    r = cli(served, "configs", "--describe", "--entity-type", "topics", "--entity-name", "slow")
    assert r.stdout == "Dynamic configs for topic slow are:\n", r.stdout
    r = cli(served, "configs", "--describe", "--entity-type", "brokers", "--entity-name", str(dst))
    assert r.stdout == f"Dynamic configs for broker {dst} are:\n", r.stdout
    assert read_all(served, "slow") == [bytes([i]) * VALUE_BYTES for i in range(RECORDS)]


def test_cancel_leaves_the_old_replicas(served, tmp_path):
    src, dst = filled_topic(served, "stuck")
    path = plan(tmp_path, "stuck", [dst])          # away from src, at 10 kB/s: minutes
    r = cli(served, "reassign-partitions", "--execute", "--reassignment-json-file", path,
            "--throttle", "10000")
    assert r.returncode == 0, r.stderr
    assert sorted(replicas(served, "stuck")) == sorted([src, dst])     # moving: both
    time.sleep(1)
    r = cli(served, "reassign-partitions", "--verify", "--reassignment-json-file", path)
    assert "is still in progress" in r.stdout
    r = cli(served, "reassign-partitions", "--cancel", "--reassignment-json-file", path)
    assert r.returncode == 0, r.stderr
    assert "Successfully cancelled partition reassignment(s) for: stuck-0" in r.stdout
    assert "Clearing topic-level throttles on topic stuck" in r.stdout
    assert replicas(served, "stuck") == [src]
    r = cli(served, "topics", "--describe", "--topic", "stuck")
    assert f"Leader: {src}" in r.stdout and f"Isr: {src}" in r.stdout, r.stdout
    r = cli(served, "reassign-partitions", "--cancel", "--reassignment-json-file", path)
    assert "None of the specified partition reassignments are active." in r.stdout
    r = cli(served, "configs", "--describe", "--entity-type", "topics", "--entity-name", "stuck")
    assert r.stdout == "Dynamic configs for topic stuck are:\n", r.stdout
    assert read_all(served, "stuck") == [bytes([i]) * VALUE_BYTES for i in range(RECORDS)]
