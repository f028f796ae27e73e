"""Every flag of kafka-topics.sh, kafka-consumer-groups.sh and kafka-configs.sh that docs/cli.md
calls supported is driven against a served cluster, and each output is compared line by line
with Kafka's format (headers, field names, separators); each refused flag answers its reason.
A new flag in the table without a case here fails the completeness test."""
from __future__ import annotations

import argparse
import re

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from minibroker.cli import parser
from minibroker.cli.common import _Refused
from minibroker.cli.kafka_flags import KAFKA_TOOLS
from minibroker.testing import ThreadedCluster
from serve_helpers import run_main

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(300)]

TOOLS = ("topics", "consumer-groups", "configs")
# Kafka's lines, as regular expressions matched whole.
TOPIC_HEAD = (r"Topic: \S+\tTopicId: [0-9a-f-]{36}\tPartitionCount: \d+\tReplicationFactor: \d+"
              r"\tConfigs: (\S+=\S*(,\S+=\S*)*)?(\tMarkedForDeletion: true)?")
PARTITION = (r"\tTopic: \S+\tPartition: \d+\tLeader: (\d+|none)\tReplicas: [\d,]+\tIsr: [\d,]*"
             r"\tElr: N/A\tLastKnownElr: N/A(\tMarkedForDeletion: true)?")
DESCRIBE = [TOPIC_HEAD, PARTITION]
NAME = [r"[\w.-]+"]
GROUP_OFFSETS = [r"", r"GROUP +TOPIC +PARTITION +CURRENT-OFFSET +LOG-END-OFFSET +LAG +"
                 r"CONSUMER-ID +HOST +CLIENT-ID", r"\S+ +\S+ +\d+ +\d+ +\d+ +\d+ +- +- +-",
                 r"Consumer group '\S+' has no active members."]
NEW_OFFSETS = [r"", r"GROUP +TOPIC +PARTITION +NEW-OFFSET", r"\S+ +\S+ +\d+ +\d+",
               r"WARN: No action will be performed as the --execute option is missing.*"]
CSV = [r"\S+,\d+,\d+"]
CONFIG_LINES = [r"(Dynamic|All) configs for (topic|broker) \S+ are:",
                r"Default configs for brokers in the cluster are:",
                r"  \S+=\S* sensitive=(true|false) synonyms=\{([A-Z_]+:\S+=\S*(, )?)*\}"]
DONE = [r"Completed updating (default )?config for .*\."]

# flag -> [(argv after the tool and --bootstrap-server, the formats every output line matches)]
CASES: dict[str, dict[str, list[tuple[list[str], list[str]]]]] = {
    "topics": {
        "--create": [(["--create", "--topic", "c1", "--partitions", "2",
                       "--replication-factor", "2"], [r"Created topic c1\."])],
        "--if-not-exists": [(["--create", "--topic", "c1", "--if-not-exists"], [])],
        "--config": [(["--create", "--topic", "c2", "--config", "retention.ms=1000"],
                      [r"Created topic c2\."])],
        "--replica-assignment": [(["--create", "--topic", "c3", "--replica-assignment",
                                   "1:2,2:1"], [r"Created topic c3\."])],
        "--partitions": [(["--alter", "--topic", "c1", "--partitions", "3"], [])],
        "--replication-factor": [(["--create", "--topic", "c4", "--replication-factor", "1"],
                                  [r"Created topic c4\."])],
        "--alter": [(["--alter", "--topic", "c3", "--replica-assignment", "1:2,2:1,1:2"], [])],
        "--if-exists": [(["--delete", "--topic", "nope", "--if-exists"], [])],
        "--delete": [(["--create", "--topic", "gone", "--partitions", "1"],
                      [r"Created topic gone\."]), (["--delete", "--topic", "gone"], [])],
        "--list": [(["--list"], NAME)],
        "--exclude-internal": [(["--list", "--exclude-internal"], NAME)],
        "--topic": [(["--describe", "--topic", "c.*"], DESCRIBE)],
        "--describe": [(["--describe"], DESCRIBE)],
        "--topic-id": [(["--describe", "--topic-id", "{c1_id}"], DESCRIBE)],
        "--under-replicated-partitions": [(["--describe", "--under-replicated-partitions"],
                                           [PARTITION])],
        "--unavailable-partitions": [(["--describe", "--unavailable-partitions"], [PARTITION])],
        "--under-min-isr-partitions": [(["--describe", "--under-min-isr-partitions"],
                                        [PARTITION])],
        "--at-min-isr-partitions": [(["--describe", "--at-min-isr-partitions"], [PARTITION])],
        "--topics-with-overrides": [(["--describe", "--topics-with-overrides"], [TOPIC_HEAD])],
        "--partition-size-limit-per-response": [(["--describe", "--topic", "c1",
                                                  "--partition-size-limit-per-response", "1"],
                                                 DESCRIBE)],
        "--command-config": [(["--list", "--command-config", "{props}"], NAME)],
        "--bootstrap-server": [(["--list"], NAME)],
    },
    "consumer-groups": {
        "--list": [(["--list"], NAME)],
        "--state": [(["--list", "--state"], [r"GROUP +STATE *", r"\S+ +\S+ *"]),
                    (["--describe", "--group", "cg", "--state"],
                     [r"", r"GROUP +COORDINATOR \(ID\) +ASSIGNMENT-STRATEGY +STATE +#MEMBERS",
                      r"cg +\S+:\d+ \(\d+\) +\S* +Empty +0"])],
        "--type": [(["--list", "--type"], [r"GROUP +TYPE *", r"\S+ +classic *"])],
        "--describe": [(["--describe", "--group", "cg"], GROUP_OFFSETS)],
        "--group": [(["--describe", "--group", "cg"], GROUP_OFFSETS)],
        "--offsets": [(["--describe", "--group", "cg", "--offsets"], GROUP_OFFSETS)],
        "--all-groups": [(["--describe", "--all-groups"], GROUP_OFFSETS)],
        "--members": [(["--describe", "--group", "cg", "--members"],
                       [r"", r"Consumer group 'cg' has no active members."])],
        "--verbose": [(["--describe", "--group", "cg", "--members", "--verbose"],
                       [r"", r"Consumer group 'cg' has no active members."])],
        "--reset-offsets": [(["--reset-offsets", "--group", "cg", "--topic", "c1",
                              "--to-earliest"], NEW_OFFSETS)],
        "--topic": [(["--reset-offsets", "--group", "cg", "--topic", "c1:0", "--to-latest",
                      "--dry-run"], NEW_OFFSETS)],
        "--all-topics": [(["--reset-offsets", "--group", "cg", "--all-topics", "--to-current",
                           "--dry-run"], NEW_OFFSETS)],
        "--dry-run": [(["--reset-offsets", "--group", "cg", "--all-topics", "--shift-by", "1",
                        "--dry-run"], NEW_OFFSETS)],
        "--execute": [(["--reset-offsets", "--group", "cg", "--all-topics", "--to-offset", "1",
                        "--execute"], NEW_OFFSETS)],
        "--to-offset": [(["--reset-offsets", "--group", "cg", "--all-topics", "--to-offset",
                          "0", "--dry-run"], NEW_OFFSETS)],
        "--to-earliest": [(["--reset-offsets", "--group", "cg", "--all-topics", "--to-earliest",
                            "--dry-run"], NEW_OFFSETS)],
        "--to-latest": [(["--reset-offsets", "--group", "cg", "--all-topics", "--to-latest",
                          "--dry-run"], NEW_OFFSETS)],
        "--to-current": [(["--reset-offsets", "--group", "cg", "--all-topics", "--to-current",
                           "--dry-run"], NEW_OFFSETS)],
        "--shift-by": [(["--reset-offsets", "--group", "cg", "--all-topics", "--shift-by", "-1",
                         "--dry-run"], NEW_OFFSETS)],
        "--to-datetime": [(["--reset-offsets", "--group", "cg", "--all-topics",
                            "--to-datetime", "2020-01-01T00:00:00.000", "--dry-run"],
                           NEW_OFFSETS)],
        "--by-duration": [(["--reset-offsets", "--group", "cg", "--all-topics",
                            "--by-duration", "PT1H", "--dry-run"], NEW_OFFSETS)],
        "--export": [(["--reset-offsets", "--group", "cg", "--all-topics", "--to-earliest",
                       "--dry-run", "--export"], CSV)],
        "--from-file": [(["--reset-offsets", "--group", "cg", "--from-file", "{csv}",
                          "--dry-run"], NEW_OFFSETS)],
        "--delete-offsets": [(["--delete-offsets", "--group", "cg2", "--topic", "c1"],
                              [r"Request succeed for deleting offsets with topic c1 group cg2",
                               r"", r"TOPIC +PARTITION +STATUS *",
                               r"c1 +\d+ +(Successful|Error: :.*) *"])],
        "--delete": [(["--delete", "--group", "cg3"],
                      [r"Deletion of requested consumer groups \('cg3'\) was successful\."])],
        "--timeout": [(["--list", "--timeout", "5000"], NAME)],
        "--command-config": [(["--list", "--command-config", "{props}"], NAME)],
        "--bootstrap-server": [(["--list"], NAME)],
    },
    "configs": {
        "--describe": [(["--describe", "--entity-type", "topics"], CONFIG_LINES)],
        "--entity-type": [(["--describe", "--entity-type", "brokers"], CONFIG_LINES)],
        "--entity-name": [(["--describe", "--entity-type", "topics", "--entity-name", "c2"],
                           CONFIG_LINES)],
        "--all": [(["--describe", "--entity-type", "brokers", "--entity-name", "1", "--all"],
                   CONFIG_LINES)],
        "--alter": [(["--alter", "--entity-type", "topics", "--entity-name", "c1",
                      "--add-config", "retention.ms=5000"], DONE)],
        "--add-config": [(["--alter", "--topic", "c1", "--add-config",
                           "cleanup.policy=[compact,delete]"], DONE)],
        "--add-config-file": [(["--alter", "--topic", "c1", "--add-config-file", "{topic}"],
                               DONE)],
        "--delete-config": [(["--alter", "--topic", "c1", "--delete-config", "retention.ms"],
                             DONE)],
        "--entity-default": [(["--alter", "--entity-type", "brokers", "--entity-default",
                               "--add-config", "log.cleaner.threads=2"], DONE),
                             (["--describe", "--entity-type", "brokers", "--entity-default"],
                              CONFIG_LINES)],
        "--topic": [(["--describe", "--topic", "c1"], CONFIG_LINES)],
        "--broker": [(["--describe", "--broker", "2"], CONFIG_LINES)],
        "--broker-defaults": [(["--describe", "--broker-defaults"], CONFIG_LINES)],
        "--force": [(["--alter", "--topic", "c1", "--add-config", "segment.ms=600000",
                      "--force"], DONE)],
        "--command-config": [(["--describe", "--topic", "c1", "--command-config", "{props}"],
                              CONFIG_LINES)],
        "--bootstrap-server": [(["--describe", "--topic", "c1"], CONFIG_LINES)],
    },
}


def _table(tool: str) -> dict[str, object]:
    ap = parser()
    sub = next(a.choices for a in ap._actions if isinstance(a, argparse._SubParsersAction))[tool]
    return {opt: a for a in sub._actions for opt in a.option_strings}


@pytest.mark.parametrize("tool", TOOLS)
def test_every_supported_flag_has_a_case(tool):
    ours = _table(tool)
    supported = [f for f in KAFKA_TOOLS[tool] if f in ours and not isinstance(ours[f], _Refused)]
    assert sorted(set(supported) - set(CASES[tool])) == []


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    d = tmp_path_factory.mktemp("conf")
    (d / "client.properties").write_text("request.timeout.ms=20000\nclient.id=conformance\n")
    with ThreadedCluster(brokers=2, group_initial_rebalance_delay_ms=0) as c:
        c.create_topic("seed", 1, 1)
        p = Producer({"bootstrap.servers": c.bootstrap})
        for _ in range(3):
            p.produce("seed", b"x", partition=0)
        assert p.flush(30) == 0
        (d / "topic.properties").write_text("retention.ms=9000\n")
        env = {"props": str(d / "client.properties"), "csv": str(d / "plan.csv"),
               "topic": str(d / "topic.properties")}
        (d / "plan.csv").write_text("c1,0,0\n")
        yield c, env


def _run(capsys, bootstrap: str, tool: str, argv: list[str]) -> tuple[int, str, str]:
    return run_main(capsys, tool, "--bootstrap-server", bootstrap, *argv)


def _commit(bootstrap: str, group: str, topic: str) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
    c.close()


@pytest.mark.parametrize("tool", TOOLS)
def test_each_flag_prints_kafkas_format(served, capsys, tool):
    cluster, env = served
    if tool == "consumer-groups":
        for group in ("cg", "cg2", "cg3"):
            _commit(cluster.bootstrap, group, "c1")
    for flag, runs in CASES[tool].items():
        for argv, formats in runs:
            if "{c1_id}" in argv:
                out = _run(capsys, cluster.bootstrap, "topics", ["--describe", "--topic", "c1"])[1]
                env["c1_id"] = re.search(r"TopicId: (\S+)", out).group(1)
            argv = [a.format(**env) if "{" in a else a for a in argv]
            code, out, err = _run(capsys, cluster.bootstrap, tool, argv)
            assert (code, err) == (0, ""), (flag, argv, err)
            for line in out.splitlines():
                assert any(re.fullmatch(f, line) for f in formats), (flag, argv, line)


@pytest.mark.parametrize("tool", TOOLS)
def test_each_refused_flag_says_why(served, capsys, tool):
    cluster, _ = served
    for flag, action in _table(tool).items():
        if isinstance(action, _Refused):
            argv = [flag] if action.nargs == 0 else [flag, "x"]
            code, _, err = _run(capsys, cluster.bootstrap, tool, ["--describe", *argv])
            assert code == 2 and err.splitlines() == [
                f"minibroker {tool}: error: argument {flag}: {action.help} "
                f"(see minibroker {tool} --help)"], err
