"""The pytest fixtures and ThreadedCluster stop cleanly: a small suite run with
`-W error::ResourceWarning` prints no "Task was destroyed but it is pending!" and no
ResourceWarning, though its producers keep ISR changes in flight as the cluster stops."""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.real_time

SUITE = """
    from kafka import KafkaProducer

    def produce(cluster, topic, rf):
        cluster.create_topic(topic, 4, rf)
        p = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        for i in range(200):
            p.send(topic, b"x" * 100, partition=i % 4)
        p.flush(30)
        p.close()

    def test_one(minibroker_cluster):
        produce(minibroker_cluster, "a", 2)
        minibroker_cluster.stop_broker(2)       # ISR shrinks in flight at the end

    def test_two(minibroker_cluster):
        produce(minibroker_cluster, "b", 1)
"""


def test_fixture_suite_leaves_no_pending_task_nor_resource_warning(pytester):
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("--minibroker-brokers", "2", "-p", "no:cacheprovider",
                                           "-W", "error::ResourceWarning", timeout=240)
    result.assert_outcomes(passed=2)
    text = "\n".join(result.outlines + result.errlines)
    assert "Task was destroyed" not in text, text
    assert "ResourceWarning" not in text, text
    assert "unclosed" not in text, text


PENDING_ALTER_PARTITION = """
import time
from minibroker.testing import ThreadedCluster
with ThreadedCluster(brokers=2, replica_lag_time_max_ms=200) as c:
    c.create_topic("t", 2, 2)
    c.stop_controller()             # AlterPartition now waits for a controller
    c.stop_broker(2)                # broker 1 shrinks the ISR after 200 ms: a call in flight
    time.sleep(1.0)
print("stopped")
"""


def test_stop_with_an_alter_partition_in_flight(tmp_path):
    """The case the issue saw (ReplicaManager._alter_partition pending at loop close), forced:
    no controller, an ISR shrink waiting for one, then the cluster stops."""
    import subprocess
    import sys
    script = tmp_path / "probe.py"
    script.write_text(PENDING_ALTER_PARTITION)
    r = subprocess.run([sys.executable, "-W", "error::ResourceWarning", str(script)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "stopped\n", r.stderr
    assert "Task was destroyed" not in r.stderr, r.stderr
    assert "ResourceWarning" not in r.stderr and "unclosed" not in r.stderr, r.stderr
