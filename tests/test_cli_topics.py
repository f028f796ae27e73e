"""`minibroker topics` as kafka-topics.sh: the flags scripts use, and a partition-count decrease
that asks before it deletes (KIP-253) and returns only once every broker serves the new count."""
from __future__ import annotations

import pytest

from serve_helpers import run_main
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def cluster():
    with ThreadedCluster(brokers=3) as c:
        yield c


def run(capsys, cluster, *args: str) -> tuple[int, str, str]:
    """`minibroker topics --bootstrap-server ... ARGS`: (exit code, stdout, stderr)."""
    return run_main(capsys, "topics", "--bootstrap-server", cluster.bootstrap, *args)


def counts(out: str) -> dict[str, str]:
    head = next(ln for ln in out.splitlines() if ln.startswith("Topic: "))
    return dict(f.split(": ", 1) for f in head.split("\t"))


def test_decrease_is_refused_without_delete_partitions(capsys, cluster):
    assert run(capsys, cluster, "--create", "--topic", "shrink1", "--partitions", "2",
               "--replication-factor", "3")[0] == 0
    assert run(capsys, cluster, "--alter", "--topic", "shrink1", "--partitions", "6")[0] == 0
    code, out, err = run(capsys, cluster, "--alter", "--topic", "shrink1", "--partitions", "4")
    assert code == 1
    assert err.strip().splitlines() == [
        "minibroker topics: error: --partitions 4 is below the 6 partitions of 'shrink1': this "
        "would delete partitions 4-5 (a KIP-253 deletion); add --delete-partitions to do that"]
    assert counts(run(capsys, cluster, "--describe", "--topic", "shrink1")[1])[
        "PartitionCount"] == "6"


def test_decrease_waits_until_every_broker_serves_the_new_count(capsys, cluster):
    run(capsys, cluster, "--create", "--topic", "shrink2", "--partitions", "2",
        "--replication-factor", "3")
    run(capsys, cluster, "--alter", "--topic", "shrink2", "--partitions", "6")
    cluster.set_metadata_propagation_delay(2, 1500)    # broker 2 learns the change late
    try:
        code, out, err = run(capsys, cluster, "--alter", "--topic", "shrink2", "--partitions",
                             "4", "--delete-partitions")
    finally:
        cluster.set_metadata_propagation_delay(2, None)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("Deleting partitions 4-5 of shrink2 (KIP-253)")
    assert any("waiting for broker 2" in ln for ln in lines[1:-1]), out
    assert lines[-1].startswith("Partitions 4-5 of shrink2 are marked for deletion; shrink2 "
                                "has 4 partitions.")
    # Right away, and from every broker (each is asked in turn by a fresh run).
    for _ in range(3):
        out = run(capsys, cluster, "--describe", "--topic", "shrink2")[1]
        assert counts(out)["PartitionCount"] == "4"
        marked = [ln for ln in out.splitlines() if "MarkedForDeletion: true" in ln]
        assert [ln.split("\t")[2] for ln in marked] == ["Partition: 4", "Partition: 5"]


def test_if_exists_and_if_not_exists_make_scripts_idempotent(capsys, cluster):
    args = ("--create", "--topic", "idem", "--partitions", "1", "--replication-factor", "1")
    assert run(capsys, cluster, *args)[:2] == (0, "Created topic idem.\n")
    code, _, err = run(capsys, cluster, *args)
    assert code == 1 and "Topic 'idem' already exists" in err
    assert run(capsys, cluster, *args, "--if-not-exists") == (0, "", "")
    assert run(capsys, cluster, "--delete", "--topic", "no-such", "--if-exists") == (0, "", "")
    assert run(capsys, cluster, "--alter", "--topic", "no-such", "--partitions", "3",
               "--if-exists") == (0, "", "")
    code, _, err = run(capsys, cluster, "--delete", "--topic", "no-such")
    assert code == 1 and err.endswith("Topic 'no-such' does not exist as expected\n")


def test_describe_prints_configs_and_filters(capsys, cluster):
    run(capsys, cluster, "--create", "--topic", "conf", "--replica-assignment", "1:2,2:3,3:1",
        "--config", "retention.ms=60000", "--config", "cleanup.policy=compact")
    out = run(capsys, cluster, "--describe", "--topic", "conf")[1]
    fields = counts(out)
    assert list(fields) == ["Topic", "TopicId", "PartitionCount", "ReplicationFactor", "Configs"]
    assert (fields["PartitionCount"], fields["ReplicationFactor"]) == ("3", "2")
    assert "cleanup.policy=compact" in fields["Configs"] and "retention.ms=60000" in \
        fields["Configs"]
    parts = [ln for ln in out.splitlines() if ln.startswith("\tTopic: conf")]
    assert [ln.split("\t")[4] for ln in parts] == ["Replicas: 1,2", "Replicas: 2,3",
                                                   "Replicas: 3,1"]
    assert [f.split(":")[0] for f in parts[0].split("\t")[1:]] == [
        "Topic", "Partition", "Leader", "Replicas", "Isr", "Elr", "LastKnownElr"]
    overrides = run(capsys, cluster, "--describe", "--topics-with-overrides")[1]
    assert "Topic: conf\t" in overrides and "Topic: idem\t" not in overrides
    assert "\tPartition:" not in overrides
    assert run(capsys, cluster, "--describe", "--under-replicated-partitions")[1] == ""
    assert "conf" in run(capsys, cluster, "--list", "--exclude-internal")[1].split()
    assert run(capsys, cluster, "--list", "--topic", "con.")[1] == "conf\n"
