"""The programs in examples/ run as their docstrings say, against this tree."""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(300)]

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_there_are_the_three_examples():
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == [
        "kip253_expansion.py", "produce_consume.py", "test_failover.py"]


def test_produce_consume_against_serve():
    server = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              env=env(), start_new_session=True)
    try:
        line = server.stdout.readline()
        assert line.startswith("BOOTSTRAP "), line
        bootstrap = line.split()[1].split(",")[0]
        for run in (1, 2):        # the second run reads only its own records (the group commits)
            r = subprocess.run([sys.executable, str(EXAMPLES / "produce_consume.py"), bootstrap],
                               capture_output=True, text=True, timeout=120, env=env())
            assert r.returncode == 0, r.stdout + r.stderr
            lines = r.stdout.splitlines()
            assert lines[-1] == "read 10 records", r.stdout
            assert sorted(ln.split(": ", 1)[1] for ln in lines[:-1]) == sorted(
                f"customer-{i % 3} order {i}" for i in range(10))
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)


def test_failover_suite_with_the_fixture():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(EXAMPLES / "test_failover.py")], cwd=ROOT, capture_output=True,
                       text=True, timeout=240, env=env())
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def test_kip253_expansion_keeps_every_keys_order():
    r = subprocess.run([sys.executable, str(EXAMPLES / "kip253_expansion.py")],
                       capture_output=True, text=True, timeout=240, env=env())
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.splitlines() == [
        "events: expanded to 4 partitions", "events: expanded to 8 partitions",
        "240 records sent across the expansions, 240 received by the ordered consumer; "
        "keys out of order: 0"]
