"""`minibroker serve --processes`: one broker per process, one command, one BOOTSTRAP line; a real
client produces and consumes through it, and acks=all writes survive one process being killed
(tests/test_serve_processes_quorum.py: any one, the active controller's included)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _children(pid: int) -> dict[int, int]:
    """node id -> pid of the serve process's broker children (their argv names the node id)."""
    out = {}
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        for child in map(int, f.read().split()):
            with open(f"/proc/{child}/cmdline", "rb") as c:
                argv = c.read().split(b"\0")
            if b"minibroker.processes" in argv:
                out[int(argv[argv.index(b"minibroker.processes") + 2])] = child
    return out


def _delivered(p: Producer, topic: str, values: list[bytes]) -> list:
    errors = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: errors.append(err) if err else None)
        p.poll(0)
    assert p.flush(60) == 0
    return errors


def test_processes_serve_a_client_and_survive_a_killed_broker_process():
    serve = subprocess.Popen(
        [sys.executable, "-m", "minibroker", "serve", "--processes", "--port", "0",
         "--override", "min.insync.replicas=2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = serve.stdout.readline()
        assert line.startswith("BOOTSTRAP "), (line, serve.stderr.read() if serve.poll() else "")
        bootstrap = line.split()[1]
        assert len(bootstrap.split(",")) == 3
        children = _children(serve.pid)
        assert sorted(children) == [1, 2, 3]        # each broker in a process of its own
        admin = AdminClient({"bootstrap.servers": bootstrap})
        # Broker 2 (a child process) leads the partition: killing it moves the leadership.
        admin.create_topics([NewTopic("kept", 1, replica_assignment=[[2, 1, 3]])])["kept"].result(30)
        deadline = time.monotonic() + 30
        while admin.list_topics("kept", timeout=10).topics["kept"].partitions[0].leader != 2:
            assert time.monotonic() < deadline, "broker 2 never led the new partition"
            time.sleep(0.1)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        before = [b"before-%d" % i for i in range(300)]
        assert _delivered(p, "kept", before) == []

        os.kill(children[2], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            md = admin.list_topics("kept", timeout=10).topics["kept"].partitions[0]
            if md.leader in (1, 3) and 2 not in md.isrs:
                break
            time.sleep(0.2)
        assert md.leader in (1, 3), md

        after = [b"after-%d" % i for i in range(300)]
        assert _delivered(p, "kept", after) == []
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["kept"])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(before) + len(after) and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
        c.close()
        assert got == before + after                  # every acknowledged write, in order
        assert serve.poll() is None                   # the command itself still serves
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            serve.kill()
    assert serve.returncode == 0
    assert not any(os.path.exists(f"/proc/{pid}") for pid in children.values())   # all reaped


def _serve(*extra: str) -> tuple[subprocess.Popen, str]:
    serve = subprocess.Popen(
        [sys.executable, "-m", "minibroker", "serve", "--processes", "--port", "0",
         "--override", "min.insync.replicas=2", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = serve.stdout.readline()
    assert line.startswith("BOOTSTRAP "), (line, serve.stderr.read() if serve.poll() else "")
    return serve, line.split()[1]


def _stop(serve: subprocess.Popen) -> None:
    serve.send_signal(signal.SIGTERM)
    try:
        serve.wait(30)
    except subprocess.TimeoutExpired:
        serve.kill()


def _wait_isr(admin: AdminClient, topic: str, want: set[int], timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if all(set(p.isrs) == want for p in parts.values()):
            return parts
        assert time.monotonic() < deadline, {i: p.isrs for i, p in parts.items()}
        time.sleep(0.2)


def test_a_killed_broker_process_is_started_again_and_rejoins_every_isr():
    serve, bootstrap = _serve()
    try:
        children = _children(serve.pid)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("back", 3, replication_factor=3)])["back"].result(30)
        _wait_isr(admin, "back", {1, 2, 3})
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        before = [b"b-%d" % i for i in range(500)]
        assert _delivered(p, "back", before) == []

        os.kill(children[2], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _children(serve.pid).get(2) in (None, children[2]):
            assert time.monotonic() < deadline, "broker 2's process was not started again"
            time.sleep(0.2)
        assert not os.path.exists(f"/proc/{children[2]}")          # reaped, no <defunct>
        after = [b"a-%d" % i for i in range(500)]
        assert _delivered(p, "back", after) == []
        # An empty replica again (no --data-dir): it catches up and rejoins every ISR.
        _wait_isr(admin, "back", {1, 2, 3})
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "g2",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe(["back"])
        got: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(got) < 1000 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.add(m.value())
        c.close()
        assert got == set(before + after)
    finally:
        _stop(serve)
    assert serve.returncode == 0


def test_no_restart_leaves_a_dead_broker_process_down():
    serve, bootstrap = _serve("--no-restart")
    try:
        children = _children(serve.pid)
        os.kill(children[3], signal.SIGKILL)
        time.sleep(3)
        assert 3 not in _children(serve.pid)
        assert not os.path.exists(f"/proc/{children[3]}")          # reaped all the same
        admin = AdminClient({"bootstrap.servers": bootstrap})
        brokers = admin.list_topics(timeout=10).brokers
        assert sorted(brokers) == [1, 2]
    finally:
        _stop(serve)
    assert serve.returncode == 0


def test_every_controller_call_reaches_the_controller_from_a_broker_process():
    """ElectLeaders was missing from the inter-process channel's calls (a broker process answered
    it with an AttributeError); the channel now has ControllerChannel's every method."""
    serve, bootstrap = _serve()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = NewTopic("elect", 1, replica_assignment=[[2, 1, 3]])
        admin.create_topics([topic])["elect"].result(30)
        _wait_isr(admin, "elect", {1, 2, 3})
        tp = TopicPartition("elect", 0)
        result = admin.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
        # Broker 2 leads already: Kafka answers ELECTION_NOT_NEEDED for the partition.
        assert result[tp].code() == KafkaError.ELECTION_NOT_NEEDED
    finally:
        _stop(serve)
    assert serve.returncode == 0


def _scrape(url: str) -> dict[tuple, float]:
    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_each_broker_process_serves_its_own_metrics_on_the_same_port_after_a_restart():
    serve, bootstrap = _serve("--metrics-port", "0")
    try:
        urls = [serve.stdout.readline().split() for _ in range(3)]
        assert [u[0] for u in urls] == ["METRICS"] * 3, urls
        urls = [u[1] for u in urls]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("m", 3, replication_factor=3)])["m"].result(30)
        _wait_isr(admin, "m", {1, 2, 3})
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        assert _delivered(p, "m", [b"x"] * 30) == []
        scraped = [_scrape(u) for u in urls]
        for i, got in enumerate(scraped, 1):         # broker i's endpoint: broker i only
            assert {dict(labels).get("broker") for _, labels in got} == {str(i)}
            assert got[("kafka_server_replicamanager_partitioncount",
                        (("broker", str(i)),))] == 3
        active = [got[("kafka_controller_kafkacontroller_activecontrollercount",
                       (("broker", str(i)),))] for i, got in enumerate(scraped, 1)]
        assert sorted(active) == [0, 0, 1]
        assert sum(got.get(("kafka_server_brokertopicmetrics_messagesin_total",
                            (("broker", str(i)), ("topic", "m"))), 0)
                   for i, got in enumerate(scraped, 1)) == 30

        children = _children(serve.pid)
        os.kill(children[2], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while _children(serve.pid).get(2) in (None, children[2]):
            assert time.monotonic() < deadline, "broker 2's process was not started again"
            time.sleep(0.2)
        while True:                                 # on the port it had
            try:
                again = _scrape(urls[1])
                break
            except OSError:
                assert time.monotonic() < deadline, "broker 2's metrics did not come back"
                time.sleep(0.2)
        assert {dict(labels).get("broker") for _, labels in again} == {"2"}
    finally:
        _stop(serve)
    assert serve.returncode == 0
