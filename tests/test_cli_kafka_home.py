"""`minibroker kafka-home DIR`: scripts written for Kafka's bin/ run unchanged against a
minibroker cluster (librdkafka's test suite finds the tools through KAFKA_PATH)."""
from __future__ import annotations

import subprocess

import pytest

from minibroker.cli import main
from minibroker.cli.kafka_flags import KAFKA_TOOLS
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]


def test_kafka_home_scripts_run_the_subcommands(tmp_path, capsys):
    main(["kafka-home", str(tmp_path / "kafka")])
    out = capsys.readouterr().out
    bin_dir = tmp_path / "kafka" / "bin"
    scripts = sorted(p.name for p in bin_dir.iterdir())
    assert {"kafka-topics.sh", "kafka-configs.sh", "kafka-consumer-groups.sh",
            "kafka-transactions.sh", "kafka-reassign-partitions.sh"} <= set(scripts)
    assert all(name.removeprefix("kafka-").removesuffix(".sh") in set(KAFKA_TOOLS) | {"acls"}
               for name in scripts)
    assert out.splitlines()[-1] == f"export KAFKA_PATH={tmp_path / 'kafka'}"
    with ThreadedCluster(brokers=1) as c:
        def sh(tool: str, *args: str) -> subprocess.CompletedProcess:
            # A clean environment: the script alone finds Python and minibroker.
            return subprocess.run([str(bin_dir / f"kafka-{tool}.sh"), *args],
                                  capture_output=True, text=True, timeout=60,
                                  env={"PATH": "/usr/bin:/bin"})
        r = sh("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", "scripted",
               "--partitions", "2", "--replication-factor", "1")
        assert (r.returncode, r.stdout) == (0, "Created topic scripted.\n"), r.stderr
        r = sh("topics", "--bootstrap-server", c.bootstrap, "--list")
        assert r.stdout.split() == ["scripted"]
        r = sh("configs", "--bootstrap-server", c.bootstrap, "--describe", "--entity-type",
               "topics", "--entity-name", "scripted")
        assert r.returncode == 0 and r.stdout.startswith("Dynamic configs for topic scripted"), \
            r.stderr
        r = sh("topics", "--zookeeper", "127.0.0.1:2181", "--list")
        assert r.returncode == 2 and r.stderr.splitlines() == [
            "minibroker topics: error: argument --zookeeper: minibroker, like Kafka 4, has no "
            "ZooKeeper: use --bootstrap-server HOST:PORT (see minibroker topics --help)"]


def test_kafka_home_in_an_unwritable_place_is_one_line(capsys, tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit) as e:
        main(["kafka-home", str(tmp_path / "file")])
    assert str(e.value.code).startswith("minibroker kafka-home: error: cannot write ")
