"""`minibroker serve` and `minibroker topics`, as a user runs them: real processes, real sockets."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

pytestmark = pytest.mark.real_time


@pytest.fixture
def served():
    p = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "3",
                          "--port", "0", "--override", "partition.deletion.check.interval.ms=100"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("BOOTSTRAP "), line + p.stderr.read()
        yield line.split()[1]
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(15) == 0


def topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minibroker", "topics", "--bootstrap-server",
                           bootstrap, *args], capture_output=True, text=True, timeout=60)


def test_serve_prints_three_brokers_and_topics_round_trip(served):
    assert len(served.split(",")) == 3
    r = topics(served, "--create", "--topic", "orders", "--partitions", "2",
               "--replication-factor", "3", "--config", "retention.ms=60000")
    assert r.returncode == 0 and r.stdout == "Created topic orders.\n", r.stderr
    r = topics(served, "--create", "--topic", "orders", "--partitions", "2")
    assert r.returncode == 1 and "TopicAlreadyExistsError" in r.stderr
    r = topics(served, "--alter", "--topic", "orders", "--partitions", "4")
    assert r.returncode == 0, r.stderr
    r = topics(served, "--describe", "--topic", "orders")
    assert "PartitionCount: 4\tReplicationFactor: 3" in r.stdout, r.stdout
    # KIP-253: shrinking is an --alter to a lower count, not below the initial count.
    r = topics(served, "--alter", "--topic", "orders", "--partitions", "1")
    assert r.returncode == 1 and "initial_partition_count" in r.stderr
    r = topics(served, "--alter", "--topic", "orders", "--partitions", "2")
    assert r.returncode == 0, r.stderr
    r = topics(served, "--list")
    assert r.stdout.splitlines() == ["orders"]
    r = topics(served, "--delete", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    r = topics(served, "--describe", "--topic", "orders")
    assert r.returncode == 1 and "UnknownTopicOrPartitionError" in r.stderr
