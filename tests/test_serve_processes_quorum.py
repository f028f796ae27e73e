"""Issue 42, must-show 1: `serve --processes` survives the death of ANY one process. Each broker
process in turn (1, 2, 3) is killed with SIGKILL while an idempotent acks=all producer and a
consumer group run (min.insync.replicas=2): admin calls succeed again (a new controller is
elected when the dead process ran it), no acknowledged record is lost, and the killed broker is
back in every ISR. How fast the admin calls come back is measured by
benchmarks/processes_failover.py (no test asserts a time)."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.test_serve_processes import _children, _delivered, _serve, _stop, _wait_isr

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
              pytest.mark.slow, pytest.mark.timeout(600)]

TOPIC, PARTITIONS = "kept", 3


class Load:
    """An idempotent acks=all producer writing numbered records, and a consumer group reading
    them, each in a thread, until stop() (bounded: at most MAX_RECORDS records)."""
    MAX_RECORDS = 200_000

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.acked: set[bytes] = set()
        self.errors: list = []
        self.consumed: set[bytes] = set()
        self._stop_producing, self._stop = threading.Event(), threading.Event()
        self._producer = threading.Thread(target=self._produce, daemon=True)
        self._consumer = threading.Thread(target=self._consume, daemon=True)

    def start(self) -> "Load":
        self._producer.start()
        self._consumer.start()
        return self

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 120000})

        def done(err, msg) -> None:
            (self.errors.append(err) if err else self.acked.add(msg.value()))
        for i in range(self.MAX_RECORDS):
            if self._stop_producing.is_set():
                break
            p.produce(TOPIC, b"r-%d" % i, on_delivery=done)
            p.poll(0.002)
        assert p.flush(150) == 0

    def _consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "must-show",
                      "auto.offset.reset": "earliest", "enable.auto.commit": True})
        c.subscribe([TOPIC])
        try:
            while not self._stop.is_set():
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    self.consumed.add(m.value())
        finally:
            c.close()

    def stop(self) -> None:
        """Stop producing (every record answered), let the group read what was acknowledged
        (up to a minute), then stop it."""
        self._stop_producing.set()
        self._producer.join(180)
        deadline = time.monotonic() + 60
        while not self.acked <= self.consumed and time.monotonic() < deadline:
            time.sleep(0.2)
        self._stop.set()
        self._consumer.join(60)


def _admin_call_succeeds(bootstrap: str, name: str, limit_s: float = 60) -> float:
    """Seconds until CreateTopics (a controller write; replication factor 2, as two brokers
    run) succeeds, each try from a new client bootstrapped with every broker (as
    benchmarks/controller_failover.py: a client's cached view of the dead broker is not what
    is measured)."""
    start = time.monotonic()
    while True:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            admin.create_topics([NewTopic(name, 1, 2)], request_timeout=1,
                                operation_timeout=1)[name].result(10)
            return time.monotonic() - start
        except Exception:  # noqa: BLE001 — no controller yet: try again
            assert time.monotonic() - start < limit_s, f"no admin call succeeded for {name}"
            time.sleep(0.05)


def _wait_for_new_process(serve_pid: int, node: int, old_pid: int, limit_s: float = 30) -> None:
    deadline = time.monotonic() + limit_s
    while _children(serve_pid).get(node) in (None, old_pid):
        assert time.monotonic() < deadline, f"broker {node}'s process was not started again"
        time.sleep(0.1)


def _everything(bootstrap: str, limit: int) -> list[bytes]:
    """Every record of TOPIC, read from the start of each partition by a fresh consumer."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got: list[bytes] = []
    quiet = 0
    try:
        while len(got) < limit and quiet < 60:
            m = c.poll(0.5)
            if m is None:
                quiet += 1
            elif m.error() is None:
                got.append(m.value())
                quiet = 0
    finally:
        c.close()
    return got


def test_sigkill_of_each_process_in_turn_loses_no_acknowledged_record():
    serve, bootstrap = _serve()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        _wait_isr(admin, TOPIC, {1, 2, 3})
        load = Load(bootstrap).start()
        controllers_killed = 0
        for victim in (1, 2, 3):
            time.sleep(2)                              # records flow before each kill
            pid = _children(serve.pid)[victim]
            controller = admin.describe_cluster().result(10).controller.id
            controllers_killed += controller == victim
            os.kill(pid, signal.SIGKILL)
            took = _admin_call_succeeds(bootstrap, f"after-{victim}")
            print(f"broker {victim} killed (controller {controller}): CreateTopics "
                  f"succeeded after {took:.2f} s")
            # Started again (no --data-dir: an empty replica) and caught up from the ISR.
            _wait_for_new_process(serve.pid, victim, pid)
            _wait_isr(admin, TOPIC, {1, 2, 3})
        assert controllers_killed >= 1               # the active controller's process was one
        time.sleep(2)
        load.stop()
        assert load.errors == [] and len(load.acked) > 0
        everything = _everything(bootstrap, len(load.acked) + 1000)
        print(f"{len(load.acked)} acknowledged, {len(everything)} read back, "
              f"{len(load.consumed)} consumed by the group")
        assert load.acked <= set(everything), sorted(load.acked - set(everything))[:10]
        assert len(everything) == len(set(everything))     # idempotence: no record twice
        assert load.acked <= load.consumed            # the group read every one of them too
        assert serve.poll() is None
    finally:
        _stop(serve)
    assert serve.returncode == 0


def test_with_a_data_dir_the_controllers_process_killed_and_every_process_started_again(tmp_path):
    """Each voter's copy of the metadata log on disk: a controller process killed and started
    again from it, then the whole command stopped and started again, keeps every topic and
    acknowledged record (the last run's registrations, stale ports and all, are replaced as each
    broker process registers again)."""
    serve, bootstrap = _serve("--data-dir", str(tmp_path))
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        _wait_isr(admin, TOPIC, {1, 2, 3})
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
        sent = [b"d-%d" % i for i in range(600)]
        assert _delivered(p, TOPIC, sent[:300]) == []
        controller = admin.describe_cluster().result(10).controller.id
        pid = _children(serve.pid)[controller]
        os.kill(pid, signal.SIGKILL)
        _admin_call_succeeds(bootstrap, "after")
        assert _delivered(p, TOPIC, sent[300:]) == []
        _wait_for_new_process(serve.pid, controller, pid)
        _wait_isr(admin, TOPIC, {1, 2, 3})
    finally:
        _stop(serve)
    assert serve.returncode == 0
    serve, bootstrap = _serve("--data-dir", str(tmp_path))
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert {TOPIC, "after"} <= set(admin.list_topics(timeout=10).topics)
        everything = _everything(bootstrap, len(sent))
        assert sorted(everything) == sorted(sent)
    finally:
        _stop(serve)
    assert serve.returncode == 0
