"""consumer-groups' Kafka flags beyond the basics: --all-groups, --list --state/--type,
--to-current, --to-datetime, --by-duration, --from-file, --export, --delete-offsets."""
from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from serve_helpers import run_main
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster():
    with ThreadedCluster(brokers=1, group_initial_rebalance_delay_ms=0) as c:
        c.create_topic("clicks", 2, 1)
        p = Producer({"bootstrap.servers": c.bootstrap})
        for i in range(10):     # partition 0: timestamps 1000..1009
            p.produce("clicks", b"v", partition=0, timestamp=1000 + i)
        p.produce("clicks", b"w", partition=1, timestamp=5000)
        assert p.flush(30) == 0
        for group, offsets in (("g1", {0: 7, 1: 1}), ("g2", {0: 3})):
            cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group})
            cons.commit(offsets=[TopicPartition("clicks", p, o) for p, o in offsets.items()],
                        asynchronous=False)
            cons.close()
        yield c


def run(capsys, cluster, *argv: str) -> tuple[int, str, str]:
    return run_main(capsys, "consumer-groups", "--bootstrap-server", cluster.bootstrap, *argv)


def plan(out: str) -> dict[tuple[str, str, str], str]:
    rows = [ln.split() for ln in out.splitlines() if ln.strip()]
    at = next(i for i, r in enumerate(rows) if r[0] == "GROUP")
    return {tuple(r[:3]): r[3] for r in rows[at + 1:]}


def test_list_with_state_and_type(cluster, capsys):
    out = run(capsys, cluster, "--list", "--state", "--type")[1].splitlines()
    assert out[0].split() == ["GROUP", "TYPE", "STATE"]
    assert {tuple(ln.split()) for ln in out[1:]} == {("g1", "classic", "Empty"),
                                                     ("g2", "classic", "Empty")}
    assert run(capsys, cluster, "--list", "--state", "Stable")[1].splitlines() == [
        "GROUP" + " " * 20 + " STATE               "]


def test_reset_targets(cluster, capsys):
    base = ("--reset-offsets", "--group", "g1", "--topic", "clicks:0", "--dry-run")
    assert plan(run(capsys, cluster, *base, "--to-current")[1]) == {("g1", "clicks", "0"): "7"}
    assert plan(run(capsys, cluster, *base, "--to-datetime",
                    "1970-01-01T00:00:01.004Z")[1]) == {("g1", "clicks", "0"): "4"}
    # Every record is older than a day: the log end.
    assert plan(run(capsys, cluster, *base, "--by-duration", "P1D")[1]) == {
        ("g1", "clicks", "0"): "10"}
    assert run(capsys, cluster, *base, "--shift-by", "-2", "--export")[1] == "clicks,0,5\n"
    code, _, err = run(capsys, cluster, *base, "--by-duration", "1 day")
    assert code == 1 and "Error parsing duration '1 day'" in err


def test_all_groups_export_and_from_file(cluster, capsys, tmp_path):
    code, out, _ = run(capsys, cluster, "--reset-offsets", "--all-groups", "--all-topics",
                       "--to-earliest", "--export", "--dry-run")
    assert (code, sorted(out.splitlines())) == (0, ["g1,clicks,0,0", "g1,clicks,1,0",
                                                    "g2,clicks,0,0"])
    csv = tmp_path / "plan.csv"
    csv.write_text("g2,clicks,0,6\ng1,clicks,0,2\n")
    code, out, _ = run(capsys, cluster, "--reset-offsets", "--group", "g2", "--from-file",
                       str(csv), "--execute")
    assert code == 0 and plan(out) == {("g2", "clicks", "0"): "6"}
    rows = run(capsys, cluster, "--describe", "--group", "g2", "--offsets")[1]
    assert any(ln.split()[:4] == ["g2", "clicks", "0", "6"] for ln in rows.splitlines())


def test_delete_offsets(cluster, capsys):
    code, out, _ = run(capsys, cluster, "--delete-offsets", "--group", "g1", "--topic",
                       "clicks:1")
    lines = out.splitlines()
    assert code == 0 and lines[0] == "Request succeed for deleting offsets with topic " \
        "clicks:1 group g1"
    assert lines[2].split() == ["TOPIC", "PARTITION", "STATUS"]
    assert lines[3].split() == ["clicks", "1", "Successful"]
    described = run(capsys, cluster, "--describe", "--group", "g1")[1]
    assert not any(ln.split()[:3] == ["g1", "clicks", "1"] for ln in described.splitlines())
