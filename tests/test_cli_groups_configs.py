"""`minibroker consumer-groups` and `minibroker configs` against a served cluster, each answer
checked against what confluent-kafka's AdminClient (librdkafka) sees of the same cluster."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from serve_helpers import cli, serve

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(240)]


@pytest.fixture
def served():
    with serve("--override", "group.initial.rebalance.delay.ms=0") as (bootstrap, _):
        yield bootstrap


def rows(out: str) -> list[dict]:
    """The table after the header line, as dicts by column name."""
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("GROUP "))
    head = lines[at].split()
    return [dict(zip(head, ln.split())) for ln in lines[at + 1:] if ln.strip()]


def committed(admin: AdminClient, group: str) -> dict[int, int]:
    res = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    return {tp.partition: tp.offset for tp in res.result(30).topic_partitions if tp.offset >= 0}


def wait_state(admin: AdminClient, group: str, state: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        d = admin.describe_consumer_groups([group])[group].result(30)
        if d.state.name == state:
            return
        time.sleep(0.2)
    raise AssertionError(f"{group} never reached {state}: {d.state}")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_consumer_groups_describe_reset_list_delete(served, protocol):
    group = f"cg-{protocol}"
    r = cli(served, "topics", "--create", "--topic", "orders", "--partitions", "2",
            "--replication-factor", "2")
    assert r.returncode == 0, r.stderr
    prod = Producer({"bootstrap.servers": served})
    for i in range(10):
        prod.produce("orders", b"v%d" % i, partition=i % 2)
    assert prod.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": served})
    c = Consumer({"bootstrap.servers": served, "group.id": group, "group.protocol": protocol,
                  "client.id": f"client-{protocol}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["orders"])
        deadline = time.monotonic() + 60
        while len(c.assignment()) < 2 and time.monotonic() < deadline:
            c.poll(0.2)
        assert len(c.assignment()) == 2
        c.commit(offsets=[TopicPartition("orders", 0, 2), TopicPartition("orders", 1, 4)],
                 asynchronous=False)
        wait_state(admin, group, "STABLE")

        # --describe: offsets, lag and the member, as the AdminClient reports them.
        r = cli(served, "consumer-groups", "--describe", "--group", group)
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[1].split() == [
            "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID"]
        [member] = admin.describe_consumer_groups([group])[group].result(30).members
        assert member.member_id == c.memberid()
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
        seen = committed(admin, group)
        assert seen == {0: 2, 1: 4}
        got = rows(r.stdout)
        assert [(d["PARTITION"], d["CURRENT-OFFSET"], d["LOG-END-OFFSET"], d["LAG"]) for d in got] \
            == [("0", "2", "5", "3"), ("1", "4", "5", "1")]
        assert {(d["CONSUMER-ID"], d["HOST"], d["CLIENT-ID"]) for d in got} == {
            (member.member_id, member.host, member.client_id)}

        # --members [--verbose] and --state, against the AdminClient's description.
        d = admin.describe_consumer_groups([group])[group].result(30)
        r = cli(served, "consumer-groups", "--describe", "--group", group, "--members",
                "--verbose")
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[1].split() == [
            "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert r.stdout.splitlines()[2].split() == [
            group, member.member_id, member.host, member.client_id, "2", "orders(0,1)"]
        r = cli(served, "consumer-groups", "--describe", "--group", group, "--state")
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines()[1].split() == [
            "GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
        g, address, node, strategy, state, count = r.stdout.splitlines()[2].split()
        assert (g, node, strategy, state.upper(), count) == (
            group, f"({d.coordinator.id})", d.partition_assignor, d.state.name, "1")
        assert address == f"{d.coordinator.host}:{d.coordinator.port}"

        # Kafka's rule: offsets are reset only while the group has no members.
        r = cli(served, "consumer-groups", "--reset-offsets", "--group", group, "--all-topics",
                "--to-earliest", "--execute")
        assert r.returncode == 1 and r.stderr.count("\n") == 1 and "inactive" in r.stderr \
            and "Stable" in r.stderr, r.stderr
        assert committed(admin, group) == {0: 2, 1: 4}
    finally:
        c.close()
    wait_state(admin, group, "EMPTY")

    r = cli(served, "consumer-groups", "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in r.stdout
    assert {(d["CONSUMER-ID"], d["HOST"], d["CLIENT-ID"]) for d in rows(r.stdout)} == {
        ("-", "-", "-")}

    # --dry-run prints the plan and changes nothing.
    r = cli(served, "consumer-groups", "--reset-offsets", "--group", group, "--all-topics",
            "--to-earliest", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert [(d["PARTITION"], d["NEW-OFFSET"]) for d in rows(r.stdout)] == [("0", "0"), ("1", "0")]
    assert committed(admin, group) == {0: 2, 1: 4}

    def reset(*how: str) -> dict[int, int]:
        r = cli(served, "consumer-groups", "--reset-offsets", "--group", group, *how, "--execute")
        assert r.returncode == 0, r.stderr
        printed = {int(d["PARTITION"]): int(d["NEW-OFFSET"]) for d in rows(r.stdout)}
        now = committed(admin, group)
        assert all(now[p] == o for p, o in printed.items()), (printed, now)
        return now

    assert reset("--topic", "orders:0", "--to-offset", "3") == {0: 3, 1: 4}
    assert reset("--all-topics", "--shift-by", "-10") == {0: 0, 1: 0}       # clamped to the start
    assert reset("--topic", "orders", "--shift-by", "2") == {0: 2, 1: 2}
    assert reset("--topic", "orders", "--to-latest") == {0: 5, 1: 5}
    assert reset("--topic", "orders", "--to-offset", "99") == {0: 5, 1: 5}  # clamped to the end

    r = cli(served, "consumer-groups", "--list")
    listed = {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert r.returncode == 0 and set(r.stdout.split()) == listed and group in listed

    r = cli(served, "consumer-groups", "--delete", "--group", group)
    assert r.returncode == 0 and \
        r.stdout == f"Deletion of requested consumer groups ('{group}') was successful.\n"
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    r = cli(served, "consumer-groups", "--delete", "--group", group)
    assert r.returncode == 1 and "GroupIdNotFoundError" in r.stderr


def topic_configs(admin: AdminClient, topic: str) -> dict[str, tuple[str, int]]:
    [fut] = admin.describe_configs([ConfigResource("topic", topic)]).values()
    return {n: (e.value, e.source) for n, e in fut.result(30).items()}


def test_configs_describe_and_alter(served):
    r = cli(served, "topics", "--create", "--topic", "conf", "--partitions", "1")
    assert r.returncode == 0, r.stderr
    admin = AdminClient({"bootstrap.servers": served})
    r = cli(served, "configs", "--describe", "--entity-type", "topics", "--entity-name", "conf")
    assert r.stdout == "Dynamic configs for topic conf are:\n", r.stdout + r.stderr

    r = cli(served, "configs", "--alter", "--entity-type", "topics", "--entity-name", "conf",
            "--add-config", "retention.ms=60000,cleanup.policy=[compact,delete]")
    assert r.returncode == 0 and r.stdout == "Completed updating config for topic conf.\n", r.stderr
    seen = topic_configs(admin, "conf")
    DYNAMIC_TOPIC, DEFAULT = 1, 5
    assert seen["retention.ms"] == ("60000", DYNAMIC_TOPIC)
    assert seen["cleanup.policy"] == ("compact,delete", DYNAMIC_TOPIC)
    r = cli(served, "configs", "--describe", "--entity-type", "topics", "--entity-name", "conf")
    lines = r.stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic conf are:"
    assert [ln.split()[0] for ln in lines[1:]] == ["cleanup.policy=compact,delete",
                                                   "retention.ms=60000"]
    assert "DYNAMIC_TOPIC_CONFIG:retention.ms=60000" in lines[2]

    r = cli(served, "configs", "--alter", "--entity-type", "topics", "--entity-name", "conf",
            "--delete-config", "retention.ms")
    assert r.returncode == 0, r.stderr
    assert topic_configs(admin, "conf")["retention.ms"] == ("604800000", DEFAULT)
    r = cli(served, "configs", "--describe", "--entity-type", "topics", "--entity-name", "conf",
            "--all")
    shown = dict(ln.split()[0].split("=", 1) for ln in r.stdout.splitlines()[1:])
    assert shown == {n: v for n, (v, _) in topic_configs(admin, "conf").items()}

    r = cli(served, "configs", "--alter", "--entity-type", "topics", "--entity-name", "conf",
            "--add-config", "retention.ms=abc")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "retention.ms" in r.stderr

    r = cli(served, "configs", "--describe", "--entity-type", "brokers", "--entity-name", "2",
            "--all")
    assert r.returncode == 0 and r.stdout.startswith("All configs for broker 2 are:\n")
    shown = dict(ln.split()[0].split("=", 1) for ln in r.stdout.splitlines()[1:])
    [fut] = admin.describe_configs([ConfigResource("broker", "2")]).values()
    # a null value (broker.rack without a rack) prints as nothing after the "="
    assert shown == {n: "" if e.value is None else e.value for n, e in fut.result(30).items()}
    assert shown["group.initial.rebalance.delay.ms"] == "0"
