"""`minibroker serve` and `minibroker topics`, as a user runs them: real processes, real sockets."""
from __future__ import annotations

import subprocess

import pytest
from kafka.admin import KafkaAdminClient

from serve_helpers import cli, serve

pytestmark = pytest.mark.real_time


@pytest.fixture
def served():
    with serve("--override", "partition.deletion.check.interval.ms=100") as (bootstrap, _):
        yield bootstrap


def topics(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return cli(bootstrap, "topics", *args)


def test_serve_prints_three_brokers_and_topics_round_trip(served):
    assert len(served.split(",")) == 3
    r = topics(served, "--create", "--topic", "orders", "--partitions", "2",
               "--replication-factor", "3", "--config", "retention.ms=60000")
    assert r.returncode == 0 and r.stdout == "Created topic orders.\n", r.stderr
    r = topics(served, "--create", "--topic", "orders", "--partitions", "2")
    assert (r.returncode, r.stderr) == (1, "minibroker topics: error: Error while executing "
                                        "topic command : Topic 'orders' already exists.\n")
    r = topics(served, "--alter", "--topic", "orders", "--partitions", "4")
    assert r.returncode == 0, r.stderr
    r = topics(served, "--describe", "--topic", "orders")
    assert "PartitionCount: 4\tReplicationFactor: 3" in r.stdout, r.stdout
    # KIP-253: shrinking is an --alter to a lower count with --delete-partitions, not below
    # the initial count.
    r = topics(served, "--alter", "--topic", "orders", "--partitions", "2")
    assert r.returncode == 1 and "add --delete-partitions" in r.stderr, r.stderr
    r = topics(served, "--alter", "--topic", "orders", "--partitions", "1", "--delete-partitions")
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "orders was created with 2 partitions and cannot shrink below that" in r.stderr
    r = topics(served, "--alter", "--topic", "orders", "--partitions", "2", "--delete-partitions")
    assert r.returncode == 0, r.stderr
    r = topics(served, "--list")
    assert r.stdout.splitlines() == ["orders"]
    # Each server in turn: a refused one first does not stop the tool.
    r = topics(f"127.0.0.1:1,{served.split(',')[1]}", "--list")
    assert r.returncode == 0 and r.stdout.splitlines() == ["orders"], r.stderr
    r = topics(served, "--delete", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    for action in ("--describe", "--delete"):
        r = topics(served, action, "--topic", "orders")
        assert (r.returncode, r.stderr) == (
            1, "minibroker topics: error: Topic 'orders' does not exist as expected\n")


def reassign(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return cli(bootstrap, "reassign-partitions", *args)


def test_reassign_partitions_execute_progress_verify(served, tmp_path):
    import json
    import time
    r = topics(served, "--create", "--topic", "moving", "--partitions", "1",
               "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    describe = topics(served, "--describe", "--topic", "moving").stdout
    leader = int(describe.split("Leader: ")[1].split()[0])
    target = [b for b in (1, 2, 3) if b != leader]
    plan = tmp_path / "move.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": target}]}))
    r = reassign(served, "--execute", "--reassignment-json-file", str(plan))
    assert r.returncode == 0, r.stderr
    request_id = int(r.stdout.splitlines()[-1])          # the request id, alone on its line
    assert f"request id {request_id}" in r.stdout
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = reassign(served, "--verify", "--reassignment-json-file", str(plan))
        if "is completed" in r.stdout:
            break
        time.sleep(0.2)
    assert r.stdout == "Reassignment of partition moving-0 is completed.\n", r.stdout + r.stderr
    r = reassign(served, "--progress", "--request", str(request_id))
    assert r.returncode == 0 and r.stdout == (
        f"Reassignment request {request_id}:\n"
        + "".join(f"  moving-0 to broker {b}: complete\n" for b in target)
        + f"Reassignment request {request_id} is complete.\n"), r.stdout + r.stderr
    r = reassign(served, "--progress", "--request", "999999")
    assert r.returncode == 1 and "InvalidRequestError" in r.stderr
    r = topics(served, "--describe", "--topic", "moving")
    assert f"Replicas: {','.join(map(str, target))}" in r.stdout


def test_serve_places_the_controller_on_a_voter():
    with serve("--controller-quorum-voters", "3,2") as (bootstrap, _):
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            assert admin.describe_cluster()["controller_id"] == 2     # the first voter
        finally:
            admin.close()
