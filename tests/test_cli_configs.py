"""`minibroker configs` as kafka-configs.sh: the shorthand entity flags, the cluster default of
the brokers (KIP-226), --add-config-file, and Kafka's refusals of what does not apply."""
from __future__ import annotations

import pytest

from serve_helpers import run_main
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def cluster():
    with ThreadedCluster(brokers=2) as c:
        c.create_topic("cfg", 1, 1)
        yield c


def run(capsys, cluster, *argv: str) -> tuple[int, str, str]:
    return run_main(capsys, "configs", "--bootstrap-server", cluster.bootstrap, *argv)


def entries(out: str) -> dict[str, str]:
    return {ln.split("=", 1)[0].strip(): ln.split("=", 1)[1].split(" sensitive=")[0]
            for ln in out.splitlines() if ln.startswith("  ")}


def test_topic_shorthand_and_config_file(cluster, capsys, tmp_path):
    props = tmp_path / "topic.properties"
    props.write_text("# Kafka properties\nretention.ms=60000\nsegment.bytes: 1048576\n")
    assert run(capsys, cluster, "--alter", "--topic", "cfg", "--add-config-file", str(props),
               "--add-config", "cleanup.policy=[compact,delete]") == (
        0, "Completed updating config for topic cfg.\n", "")
    code, out, _ = run(capsys, cluster, "--describe", "--topic", "cfg")
    assert out.splitlines()[0] == "Dynamic configs for topic cfg are:"
    assert entries(out) == {"cleanup.policy": "compact,delete", "retention.ms": "60000",
                            "segment.bytes": "1048576"}
    assert "  retention.ms=60000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=" \
        "60000, DEFAULT_CONFIG:log.retention.ms=604800000}" in out.splitlines()


def test_broker_defaults_and_per_broker(cluster, capsys):
    assert run(capsys, cluster, "--alter", "--broker-defaults", "--add-config",
               "log.retention.ms=3600000")[1] == \
        "Completed updating default config for brokers in the cluster.\n"
    assert run(capsys, cluster, "--alter", "--entity-type", "brokers", "--entity-name", "2",
               "--add-config", "num.io.threads=4")[1] == "Completed updating config for broker 2.\n"
    for _ in range(100):                    # each broker learns them from UpdateMetadata
        out = run(capsys, cluster, "--describe", "--entity-type", "brokers")[1]
        if "num.io.threads" in out and "log.retention.ms" in out:
            break
    sections = out.split("configs for ")
    assert [s.split(" are:")[0] for s in sections[1:]] == ["broker 1", "broker 2",
                                                           "brokers in the cluster"]
    assert out.splitlines()[-2:] == [
        "Default configs for brokers in the cluster are:",
        "  log.retention.ms=3600000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
        "log.retention.ms=3600000, DEFAULT_CONFIG:log.retention.ms=604800000}"]
    assert entries(sections[2]) == {"num.io.threads": "4"}
    code, out, _ = run(capsys, cluster, "--describe", "--broker", "1", "--all")
    assert out.splitlines()[0] == "All configs for broker 1 are:"
    assert entries(out)["log.retention.ms"] == "3600000"
    assert run(capsys, cluster, "--alter", "--entity-type", "brokers", "--entity-default",
               "--delete-config", "log.retention.ms")[0] == 0


@pytest.mark.parametrize("argv,says", [
    (["--describe", "--client", "app"], "argument --client: minibroker serves no client quotas"),
    (["--describe", "--entity-type", "ips"], "--entity-type ips: minibroker serves no client"),
    (["--describe", "--broker-logger", "1"], "not log4j loggers"),
    (["--describe", "--bootstrap-controller", "x:1"], "use --bootstrap-server"),
    (["--describe", "--entity-type", "topics", "--entity-default"],
     "--entity-default applies here to brokers only"),
    (["--describe", "--broker", "x"], "must be a valid integer broker id, but it is: x"),
    (["--describe", "--topic", "cfg", "--broker", "1"], "only one entity type may be given"),
    (["--alter", "--broker", "1", "--add-config", "broker.id=7"],
     "Cannot update these configs dynamically: Set(broker.id)"),
    (["--alter", "--broker-defaults", "--add-config", "listeners=PLAINTEXT://:1"],
     "Cannot update these configs at default cluster level, broker id must be specified"),
    (["--alter", "--topic", "cfg", "--add-config-file", "/no/such"],
     "cannot read --add-config-file /no/such: no such file or directory"),
])
def test_refusals_are_one_line(cluster, capsys, argv, says):
    code, out, err = run(capsys, cluster, *argv)
    assert code != 0 and len(err.splitlines()) == 1 and says in err, err
