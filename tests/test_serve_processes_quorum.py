"""Issue 42, must-show 1: `serve --processes` survives the death of ANY one process. Each broker
process in turn (1, 2, 3) is killed with SIGKILL while an idempotent acks=all producer and a
consumer group run (min.insync.replicas=2): admin calls succeed again (a new controller is
elected when the dead process ran it), no acknowledged record is lost, and the killed broker is
back in every ISR. How fast the admin calls come back is measured by
benchmarks/processes_failover.py (no test asserts a time)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from minibroker.controller.metadata_log import MetadataLog
from minibroker.controller.metadata_store import MetadataStore
from minibroker.controller.quorum import METADATA_DIR
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


def _everything(bootstrap: str, limit: int, topic: str = TOPIC,
                partitions: int = PARTITIONS) -> list[bytes]:
    """Every record of `topic`, read from the start of each partition by a fresh consumer."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
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
    # On disk each record kept the epoch it was appended in: a later one after the kill.
    for broker in (1, 2, 3):
        store = MetadataStore(str(tmp_path / f"broker-{broker}" / METADATA_DIR))
        copy = MetadataLog(store)
        store.close()
        epochs = [copy.epoch_at(o) for o in range(copy.base - 1, len(copy))]
        assert epochs == sorted(epochs) and epochs[-1] >= 2, (broker, epochs)
    serve, bootstrap = _serve("--data-dir", str(tmp_path))
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert {TOPIC, "after"} <= set(admin.list_topics(timeout=10).topics)
        everything = _everything(bootstrap, len(sent))
        assert sorted(everything) == sorted(sent)
    finally:
        _stop(serve)
    assert serve.returncode == 0


def _partition(bootstrap: str, topic: str) -> Any:
    """Partition 0 of `topic` as a fresh client bootstrapped with `bootstrap` sees it (None: no
    answer in 5 s). A fresh client: a long-lived one may ask the stopped process and wait."""
    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
        return md.topics[topic].partitions[0]
    except Exception:  # noqa: BLE001 — no answer this time: asked again
        return None


def _until(what: str, check: Callable[[], Any], limit_s: float = 60) -> Any:
    deadline = time.monotonic() + limit_s
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


@pytest.mark.parametrize("the_controllers", [False, True])
def test_a_stopped_process_is_fenced_and_rejoins_the_isr_after_sigcont(the_controllers):
    """Issue 42: a SIGSTOPped broker process is alive but silent. Its heartbeats stop, so after
    broker.session.timeout.ms the active controller fences it: the partition it led moves within
    the ISR and an acks=all producer (min.insync.replicas=2) keeps getting acks. After SIGCONT
    its next heartbeat unfences it, it catches up and rejoins the ISR, and the preferred-leader
    check gives it its leadership back."""
    serve, bootstrap = _serve("--override", "broker.session.timeout.ms=3000",
                              "--override", "broker.heartbeat.interval.ms=500",
                              "--override", "leader.imbalance.check.interval.seconds=1")
    stopped = None
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        controller = admin.describe_cluster().result(10).controller.id
        victim = controller if the_controllers else next(n for n in (3, 2, 1) if n != controller)
        others = [n for n in (1, 2, 3) if n != victim]
        live = ",".join(a for n, a in enumerate(bootstrap.split(","), 1) if n != victim)
        admin.create_topics([NewTopic("stopped", 1, replica_assignment=[[victim, *others]])]
                            )["stopped"].result(30)
        _wait_isr(admin, "stopped", {1, 2, 3})
        _until("the victim never led", lambda: getattr(_partition(bootstrap, "stopped"),
                                                       "leader", None) == victim)
        # A request to the stopped process is given up after 3 s (librdkafka waits 60 s for a
        # Metadata answer by default: socket.timeout.ms).
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "request.timeout.ms": 3000, "socket.timeout.ms": 3000,
                      "topic.metadata.refresh.interval.ms": 1000})
        assert _delivered(p, "stopped", [b"before-%d" % i for i in range(200)]) == []
        stopped = _children(serve.pid)[victim]
        os.kill(stopped, signal.SIGSTOP)
        at = time.monotonic()
        md = _until("the stopped process was never fenced", lambda: (
            lambda m: m if m is not None and m.leader in others and victim not in m.isrs
            else None)(_partition(live, "stopped")))
        print(f"broker {victim} fenced {time.monotonic() - at:.1f} s after SIGSTOP: {md}")
        assert _delivered(p, "stopped", [b"during-%d" % i for i in range(200)]) == []
        print(f"acknowledged {time.monotonic() - at:.1f} s after SIGSTOP")
        os.kill(stopped, signal.SIGCONT)
        stopped = None
        at = time.monotonic()
        # Asked of the others: the resumed process answers from what it knew when stopped.
        _until("the resumed process never rejoined the ISR", lambda: set(getattr(
            _partition(live, "stopped"), "isrs", ())) == {1, 2, 3})
        print(f"back in the ISR {time.monotonic() - at:.1f} s after SIGCONT")
        _until("the preferred leader never led again", lambda: getattr(
            _partition(live, "stopped"), "leader", None) == victim)
        print(f"leads again {time.monotonic() - at:.1f} s after SIGCONT")
        assert _delivered(p, "stopped", [b"after-%d" % i for i in range(200)]) == []
        got = _everything(bootstrap, 600, "stopped", 1)
        assert sorted(got) == sorted([b"%s-%d" % (w, i) for w in (b"before", b"during", b"after")
                                      for i in range(200)])
        assert serve.poll() is None
    finally:
        if stopped is not None:
            os.kill(stopped, signal.SIGCONT)
        _stop(serve)
    assert serve.returncode == 0


def test_the_supervisors_death_stops_nothing():
    """Nothing between the broker processes passes through the supervisor (processes/mesh.py):
    SIGKILL of it leaves a cluster that still acknowledges acks=all writes, answers admin calls,
    and survives the death of its active controller's process after it (without a restart:
    nothing is left to start one)."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "minibroker", "serve", "--processes", "--port", "0",
         "--override", "min.insync.replicas=2"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        line = serve.stdout.readline()
        assert line.startswith("BOOTSTRAP "), line
        bootstrap = line.split()[1]
        children = _children(serve.pid)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        _wait_isr(admin, TOPIC, {1, 2, 3})
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5})
        sent = [b"s-%d" % i for i in range(900)]
        assert _delivered(p, TOPIC, sent[:300]) == []

        os.kill(serve.pid, signal.SIGKILL)
        serve.wait(10)
        assert all(os.path.exists(f"/proc/{pid}") for pid in children.values())
        assert _delivered(p, TOPIC, sent[300:600]) == []
        _admin_call_succeeds(bootstrap, "no-supervisor")

        controller = admin.describe_cluster().result(10).controller.id
        os.kill(children[controller], signal.SIGKILL)
        took = _admin_call_succeeds(bootstrap, "no-supervisor-no-controller")
        print(f"controller {controller} killed with no supervisor: CreateTopics succeeded "
              f"after {took:.2f} s")
        others = {1, 2, 3} - {controller}
        _wait_isr(admin, TOPIC, others)
        assert _delivered(p, TOPIC, sent[600:]) == []
        assert sorted(_everything(bootstrap, len(sent))) == sorted(sent)
    finally:
        try:
            os.killpg(serve.pid, signal.SIGTERM)     # the orphaned broker processes stop cleanly
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30
        while any(os.path.exists(f"/proc/{pid}") and _alive(pid) for pid in children.values()):
            if time.monotonic() > deadline:
                os.killpg(serve.pid, signal.SIGKILL)
                raise AssertionError("broker processes did not stop on SIGTERM")
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    """Not a zombie (an orphan's exit status is collected by init, maybe not at once)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
