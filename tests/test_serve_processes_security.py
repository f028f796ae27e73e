"""`serve --processes` with a secured client listener (issue 41): each broker process serves the
client listener clients are given and, for replication, a SASL_PLAINTEXT listener of the brokers'
own that only the cluster user passes (tests/security/test_inter_broker_listener.py). Real
processes, real clients: acks=all writes to an RF-3 topic and a transaction's come back, a killed
process comes back on its client port and rejoins the ISR, and an unauthenticated stranger
sending each broker process's other ports a replica's Fetch or the controller's requests is
closed unanswered (the link between the broker processes says only its challenge)."""
from __future__ import annotations

import os
import signal
import socket
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic as KafkaNewTopic

from cluster_helpers import FETCH_VERSION
from serve_helpers import serve
from tests.broker.test_control_plane import attacks, raw
from tests.security.test_control_plane_closed import listening_ports
from tests.security.test_inter_broker_listener import replica_fetch
from tests.test_serve_processes import _children

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
              pytest.mark.timeout(240)]


def _ports(bootstrap: str) -> list[int]:
    return [int(addr.rsplit(":", 1)[1]) for addr in bootstrap.split(",")]


def _closed_unanswered(port: int, frame: bytes) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(frame)
        s.settimeout(10)
        return s.recv(1) == b""


def _challenge(port: int) -> bytes:
    """What a port says unasked within 1 s (the processes' link: its 32-byte challenge)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.settimeout(1)
        try:
            return s.recv(64)
        except TimeoutError:
            return b""


def _closed_after_its_challenge(port: int, frame: bytes) -> bool:
    """The link closes a connection that does not prove it holds the processes' secret, having
    said nothing but its challenge (the frame taken for a proof, or cut short)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.settimeout(10)
        assert len(s.recv(32)) == 32
        s.sendall(frame)
        s.shutdown(socket.SHUT_WR)
        return s.recv(1) == b""


def _strangers_get_nothing(pid: int, client_ports: list[int]) -> set[int]:
    """Every port of `pid` but the client listener's (BROKER, the control plane, the link
    between broker processes) closes a plain connection's replica Fetch and controller requests
    unanswered; those ports."""
    others = listening_ports(pid) - set(client_ports)
    assert len(others) == 3, others                 # BROKER, the control plane, the link
    links = {port for port in others if _challenge(port)}
    assert len(links) == 1, links
    frames = [raw(req, version) for req, version in attacks(1).values()]
    frames.append(raw(replica_fetch(2), FETCH_VERSION))
    for port in sorted(others - links):
        assert all(_closed_unanswered(port, f) for f in frames), port
    for port in links:
        assert all(_closed_after_its_challenge(port, f) for f in frames), port
    return others


def _wait(cond, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not (result := cond()):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return result


def _transaction(sec: dict, topic: str) -> list[bytes]:
    """Committed records on every partition: the coordinator's WriteTxnMarkers reach the other
    broker processes' BROKER listeners (a read_committed consumer sees them only then)."""
    producer = Producer({**sec, "transactional.id": "tx", "acks": "all"})
    producer.init_transactions(30)
    producer.begin_transaction()
    values = [b"tx-%d" % i for i in range(30)]
    for i, v in enumerate(values):
        producer.produce(topic, v, partition=i % 3)
    producer.commit_transaction(30)
    return values


def test_sasl_ssl_processes_replicate_acks_all_and_keep_strangers_out(tmp_path):
    tls = tmp_path / "tls"
    with serve("--processes", "--security-protocol", "SASL_SSL", "--tls-dir", str(tls),
               "--user", "alice:alice-secret", "--super-user", "alice", "--acls",
               "--override", "min.insync.replicas=2") as (bootstrap, p):
        assert p.stdout.readline().strip() == f"CA {tls / 'ca.pem'}"
        sec = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
               "ssl.ca.location": str(tls / "ca.pem"), "sasl.mechanism": "SCRAM-SHA-512",
               "sasl.username": "alice", "sasl.password": "alice-secret"}
        admin = AdminClient(sec)
        admin.create_topics([NewTopic("t", 3, replication_factor=3)])["t"].result(30)

        def isr_full():
            parts = admin.list_topics("t", timeout=10).topics["t"].partitions
            return all(set(x.isrs) == {1, 2, 3} for x in parts.values())
        _wait(isr_full, "the ISRs never filled")
        md = admin.list_topics(timeout=10)
        assert sorted(b.port for b in md.brokers.values()) == sorted(_ports(bootstrap))

        producer = Producer({**sec, "acks": "all", "linger.ms": 5})
        errors: list = []
        values = [b"v-%d" % i for i in range(600)]
        for i, v in enumerate(values):
            producer.produce("t", v, on_delivery=lambda e, m: errors.append(e) if e else None)
            if i == 299:
                assert producer.flush(60) == 0 and errors == []
                children = _children(p.pid)
                for node, pid in sorted(children.items()):
                    others = _strangers_get_nothing(pid, _ports(bootstrap))
                    resource = ConfigResource("BROKER", str(node))
                    listeners = admin.describe_configs([resource])[resource].result(30)
                    inter = listeners["listeners"].value.split(",")[1]
                    assert inter.startswith("BROKER://") and int(inter.rsplit(":", 1)[1]) in others
                # A killed broker process comes back on its client port, its followers
                # authenticating again on every BROKER listener.
                os.kill(children[2], signal.SIGKILL)
                _wait(lambda: _children(p.pid).get(2) not in (None, children[2]),
                      "broker 2's process was not started again")
                _wait(isr_full, "broker 2 never rejoined the ISRs")
                assert admin.list_topics(timeout=10).brokers[2].port == _ports(bootstrap)[1]
        assert producer.flush(60) == 0 and errors == []
        values += _transaction(sec, "t")

        consumer = Consumer({**sec, "group.id": "g", "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed"})
        consumer.subscribe(["t"])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            m = consumer.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
        consumer.close()
        assert sorted(got) == sorted(values)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SSL"])
def test_other_secured_client_listeners_with_processes(tmp_path, protocol):
    tls = tmp_path / "tls"
    args = ["--tls-dir", str(tls)] if protocol == "SSL" else ["--user", "bob:bob-secret"]
    with serve("--processes", "--security-protocol", protocol, *args,
               "--override", "min.insync.replicas=2") as (bootstrap, p):
        sec = dict(bootstrap_servers=bootstrap, security_protocol=protocol)
        if protocol == "SSL":
            assert p.stdout.readline().strip() == f"CA {tls / 'ca.pem'}"
            sec["ssl_cafile"] = str(tls / "ca.pem")
        else:
            sec.update(sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="bob",
                       sasl_plain_password="bob-secret")
        admin = KafkaAdminClient(**sec)
        admin.create_topics([KafkaNewTopic("q", 1, 3)])
        admin.close()
        producer = KafkaProducer(acks="all", **sec)
        values = [b"q-%d" % i for i in range(50)]
        for v in values:
            producer.send("q", v).get(30)
        producer.close()
        consumer = KafkaConsumer("q", auto_offset_reset="earliest", consumer_timeout_ms=5000,
                                 **sec)
        assert [m.value for m in consumer][:len(values)] == values
        consumer.close()
        for pid in _children(p.pid).values():
            _strangers_get_nothing(pid, _ports(bootstrap))
