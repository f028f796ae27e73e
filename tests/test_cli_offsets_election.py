"""get-offsets, delete-records and leader-election as Kafka's tools print them."""
from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Producer

from serve_helpers import run_main
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster():
    with ThreadedCluster(brokers=3) as c:
        c.create_topic("ledger", 2, 3)
        p = Producer({"bootstrap.servers": c.bootstrap})
        for i in range(5):
            p.produce("ledger", value=b"x", partition=0, timestamp=1000 + i)
        p.produce("ledger", value=b"y", partition=1)
        assert p.flush(30) == 0
        yield c


def run(capsys, *argv: str) -> tuple[int, str, str]:
    return run_main(capsys, *argv)


def test_get_offsets(cluster, capsys):
    b = ("--bootstrap-server", cluster.bootstrap)
    assert run(capsys, "get-offsets", *b, "--topic", "ledger")[1] == "ledger:0:5\nledger:1:1\n"
    assert run(capsys, "get-offsets", *b, "--topic-partitions", "led.*:1", "--time",
               "earliest")[1] == "ledger:1:0\n"
    assert run(capsys, "get-offsets", *b, "--topic", "ledger", "--partitions", "0", "--time",
               "-3")[1] == "ledger:0:4\n"
    assert run(capsys, "get-offsets", *b, "--topic", "ledger", "--partitions", "0", "--time",
               "1002")[1] == "ledger:0:2\n"
    code, _, err = run(capsys, "get-offsets", *b, "--time", "yesterday")
    assert code == 1 and "Malformed time argument yesterday" in err


def test_delete_records(cluster, capsys, tmp_path):
    plan = tmp_path / "purge.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "ledger", "partition": 0, "offset": 2}]}))
    code, out, _ = run(capsys, "delete-records", "--bootstrap-server", cluster.bootstrap,
                       "--offset-json-file", str(plan))
    assert (code, out.splitlines()) == (0, ["Executing records delete operation",
                                            "Records delete operation completed:",
                                            "partition: ledger-0\tlow_watermark: 2"])
    assert run(capsys, "get-offsets", "--bootstrap-server", cluster.bootstrap, "--topic",
               "ledger", "--partitions", "0", "--time", "earliest")[1] == "ledger:0:2\n"


def test_preferred_leader_election(cluster, capsys):
    preferred = cluster.leader_of("ledger", 0)
    cluster.restart_broker(preferred)          # leadership moves away while it is down
    deadline = time.monotonic() + 30
    while cluster.leader_of("ledger", 0) == preferred and time.monotonic() < deadline:
        time.sleep(0.05)
    argv = ("leader-election", "--bootstrap-server", cluster.bootstrap, "--election-type",
            "preferred", "--topic", "ledger", "--partition", "0")
    while time.monotonic() < deadline:          # until the restarted broker is back in sync
        code, out, err = run(capsys, *argv)
        if code == 0:
            break
        time.sleep(0.1)
    assert out == "Successfully completed leader election (PREFERRED) for partitions ledger-0\n", \
        err
    assert run(capsys, *argv)[1] == "Valid replica already elected for partitions ledger-0\n"
    code, _, err = run(capsys, "leader-election", "--bootstrap-server", cluster.bootstrap,
                       "--election-type", "preferred")
    assert code == 1 and "One and only one of the following options is required" in err


def test_log_dirs(cluster, capsys):
    import json
    code, out, _ = run(capsys, "log-dirs", "--bootstrap-server", cluster.bootstrap,
                       "--describe", "--topic-list", "ledger", "--broker-list", "1,2")
    lines = out.splitlines()
    assert lines[:2] == ["Querying brokers for log directories information",
                         "Received log directory information from brokers 1,2"]
    doc = json.loads(lines[2])
    assert doc["version"] == 1 and [b["broker"] for b in doc["brokers"]] == [1, 2]
    parts = {p["partition"]: p for b in doc["brokers"] for d in b["logDirs"]
             for p in d["partitions"]}
    assert set(parts) == {"ledger-0", "ledger-1"} and parts["ledger-0"]["size"] > 0
    assert set(parts["ledger-0"]) == {"partition", "size", "offsetLag", "isFuture"}
