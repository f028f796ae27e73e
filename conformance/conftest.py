"""Fixtures for the black-box conformance suite.

The session fixture ``cluster`` starts the broker under test as a subprocess:
``$MINIBROKER_CONFORMANCE_CMD`` (default ``python -m minibroker serve --brokers 3 --port 0
--override group.initial.rebalance.delay.ms=0``) must
print ``BOOTSTRAP host:port,...`` as its first stdout line within 30 s. ``cluster.replication`` is
``$MINIBROKER_CONFORMANCE_RF`` (default 3; use 1 against a one-broker peer such as Tansu).
The process group is killed at the end of the session.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

import pytest

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "fault: needs broker control (stops brokers) through minibroker.testing")
    config.addinivalue_line(
        "markers", "clients(*names): the real clients a test drives, beyond its parameters")


# MINIBROKER_CLIENTS opts out of clients explicitly: "python" (the pip-installed ones), or names
# (kafka_python,aiokafka,confluent,kafkajs,kcat; `spark` selects tests/spark). Unset or "all": every client, and a client that
# is not installed fails its tests. A client not selected is skipped, saying so.
PYTHON_CLIENTS = ("kafka_python", "aiokafka", "confluent")
ALL_CLIENTS = PYTHON_CLIENTS + ("kafkajs", "kcat")


def selected_clients() -> tuple[str, ...]:
    raw = os.environ.get("MINIBROKER_CLIENTS", "").strip() or "all"
    names: list[str] = []
    for word in (w.strip() for w in raw.split(",") if w.strip()):
        if word == "spark":
            continue                # tests/spark's selection (PySpark), not a conformance client
        group = {"all": ALL_CLIENTS, "python": PYTHON_CLIENTS}.get(word, (word,))
        unknown = [n for n in group if n not in ALL_CLIENTS]
        if unknown:
            raise pytest.UsageError(f"MINIBROKER_CLIENTS: unknown client {unknown[0]!r} (known: "
                                    f"all, python, {', '.join(ALL_CLIENTS)})")
        names += group
    return tuple(n for n in ALL_CLIENTS if n in names)


def pytest_collection_modifyitems(config, items):
    chosen = selected_clients()
    if chosen == ALL_CLIENTS:
        return
    for item in items:
        used = set()
        if hasattr(item, "callspec"):
            used |= {v for k, v in item.callspec.params.items()
                     if k in ("client", "producer", "consumer") and v in ALL_CLIENTS}
        mark = item.get_closest_marker("clients")
        used |= set(mark.args) if mark else set()
        left_out = sorted(used - set(chosen))
        if left_out:
            item.add_marker(pytest.mark.skip(
                reason=f"{', '.join(left_out)} not selected (MINIBROKER_CLIENTS="
                       f"{os.environ.get('MINIBROKER_CLIENTS')})"))


@dataclass
class ServedCluster:
    bootstrap: str
    replication: int
    proc: subprocess.Popen
    log_path: str
    _names: itertools.count = field(default_factory=itertools.count)

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def topic_name(self, hint: str) -> str:
        """A topic name unique within this session (and across sessions on a reused broker)."""
        clean = re.sub(r"[^A-Za-z0-9._-]+", "-", hint).strip("-")[:80]
        return f"conf-{clean}-{os.getpid()}-{next(self._names)}"


def _default_cmd() -> str:
    # No initial rebalance delay: the group tests join members one by one with bounded waits.
    return (f"{shlex.quote(sys.executable)} -m minibroker serve --brokers 3 --port 0 "
            "--override group.initial.rebalance.delay.ms=0")


def _wait_listening(bootstrap: str, deadline: float) -> None:
    for hostport in bootstrap.split(","):
        host, _, port = hostport.rpartition(":")
        while True:
            try:
                with socket.create_connection((host, int(port)), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{hostport} not accepting connections") from None
                time.sleep(0.05)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT_S), (signal.SIGKILL, STOP_TIMEOUT_S)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="session")
def cluster():
    cmd = os.environ.get("MINIBROKER_CONFORMANCE_CMD") or _default_cmd()
    replication = int(os.environ.get("MINIBROKER_CONFORMANCE_RF", "3"))
    with served_cluster(cmd, replication) as served:
        yield served


@contextlib.contextmanager
def served_cluster(cmd: str, replication: int = 3):
    """Run broker command `cmd` (it prints BOOTSTRAP first) until the block ends; its process
    group is killed then."""
    log = tempfile.NamedTemporaryFile(prefix="minibroker-conformance-", suffix=".log", delete=False)
    proc = subprocess.Popen(shlex.split(cmd), stdout=subprocess.PIPE, stderr=log,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    lines: queue.Queue = queue.Queue()

    def drain():  # keep reading so the broker never blocks on a full stdout pipe
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=drain, name="conformance-broker-stdout", daemon=True).start()
    served = None
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        try:
            first = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty:
            first = None
        text = (first or b"").decode(errors="replace").strip()
        if not text.startswith("BOOTSTRAP "):
            pytest.fail(f"broker command {cmd!r} did not print 'BOOTSTRAP host:port,...' first "
                        f"within {START_TIMEOUT_S}s (got {text!r}, rc={proc.poll()}); log "
                        f"{log.name}:\n{open(log.name, 'rb').read()[-4000:].decode(errors='replace')}")
        bootstrap = text.split(None, 1)[1].strip()
        _wait_listening(bootstrap, deadline)
        served = ServedCluster(bootstrap=bootstrap, replication=replication, proc=proc,
                               log_path=log.name)
        yield served
    finally:
        _stop(proc)
        log.close()


@pytest.fixture(autouse=True)
def no_librdkafka_protocol_errors():
    """Fail a test during which a librdkafka client (given ``logger=conformance.rdlog.LOG``)
    could not parse a response: librdkafka only logs it and retries."""
    from conformance import rdlog
    rdlog.take()
    yield
    errors = rdlog.take()
    assert not errors, f"librdkafka protocol errors ({len(errors)}), first: {errors[0]}"
