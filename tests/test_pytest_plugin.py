"""The pytest plugin shipped with the package: a client's own suite gets a running cluster."""
from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.real_time


def test_minibroker_cluster_fixture_serves_a_real_client(pytester):
    pytester.makepyfile(test_client="""
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        def test_round_trip(minibroker_cluster):
            assert len(minibroker_cluster.bootstrap.split(",")) == 2
            minibroker_cluster.create_topic("t", 1, 2)
            p = KafkaProducer(bootstrap_servers=minibroker_cluster.bootstrap, acks="all")
            p.send("t", b"hello").get(10)
            p.close()
            c = KafkaConsumer(bootstrap_servers=minibroker_cluster.bootstrap,
                              consumer_timeout_ms=3000, auto_offset_reset="earliest")
            c.assign([TopicPartition("t", 0)])
            assert [m.value for m in c] == [b"hello"]
            c.close()
    """)
    result = pytester.runpytest_subprocess("--minibroker-brokers", "2", "-p", "no:cacheprovider",
                                           timeout=120)
    result.assert_outcomes(passed=1)


RELOAD_KAFKA = """
    import importlib
    import warnings

    import kafka.protocol.admin

    def test_kafka_python_defines_its_classes_again():
        # What a broker starting inside a test does: kafka-python defines message classes,
        # reading each schema with the deprecated importlib.resources.read_text.
        importlib.reload(kafka.protocol.admin)
"""


def _warnings(result) -> int:
    import re
    m = re.search(r"(\d+) warnings?", result.stdout.lines[-1])
    return int(m.group(1)) if m else 0


def test_users_do_not_see_kafka_pythons_deprecation_warnings(pytester):
    pytester.makepyfile(test_reload=RELOAD_KAFKA, test_client="""
        def test_cluster(minibroker_cluster):
            minibroker_cluster.create_topic("t", 2, 2)
    """)
    result = pytester.runpytest_subprocess("--minibroker-brokers", "2", "-p", "no:cacheprovider",
                                           timeout=120)
    result.assert_outcomes(passed=2)
    assert _warnings(result) == 0, result.stdout.str()
    # The control: without the plugin the same reload shows kafka-python's warnings.
    result = pytester.runpytest_subprocess("-p", "no:minibroker", "-p", "no:cacheprovider",
                                           "test_reload.py", timeout=120)
    result.assert_outcomes(passed=1)
    assert _warnings(result) > 10, result.stdout.str()


def test_fresh_cluster_fixture_is_new_for_each_test_and_the_session_one_is_shared(pytester):
    pytester.makepyfile(test_scopes="""
        seen = {}

        def test_a(minibroker_cluster, minibroker_fresh_cluster):
            seen["shared"], seen["fresh"] = minibroker_cluster, minibroker_fresh_cluster
            minibroker_fresh_cluster.create_topic("only-here", 1, 1)
            minibroker_cluster.stop_broker(2)           # carries over to test_b

        def test_b(minibroker_cluster, minibroker_fresh_cluster):
            assert minibroker_cluster is seen["shared"]
            assert minibroker_fresh_cluster is not seen["fresh"]
            assert len(minibroker_cluster.bootstrap.split(",")) == 2   # broker 2 still stopped
            assert len(minibroker_fresh_cluster.bootstrap.split(",")) == 3
            minibroker_cluster.start_broker(2)
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=180)
    result.assert_outcomes(passed=2)


def test_loading_the_plugin_raises_no_deprecation_warning():
    """pytest >= 9.2 shows the warnings raised while it imports plugins: importing the plugin (and
    with it kafka-python's message classes) must raise none."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c",
                        "import minibroker.testing.pytest_plugin, minibroker.cli"],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stderr) == (0, ""), r.stderr[-2000:]


def test_a_failing_test_report_carries_its_trace(pytester):
    pytester.makepyfile(test_traced="""
        from kafka import KafkaProducer

        def test_passes(minibroker_cluster):
            minibroker_cluster.create_topic("ok", 1, 1)

        def test_fails(minibroker_cluster):
            p = KafkaProducer(bootstrap_servers=minibroker_cluster.bootstrap, client_id="failing")
            p.send("ok", b"x").get(10)
            p.close()
            assert False, "the client's bug"
    """)
    result = pytester.runpytest_subprocess("--minibroker-brokers", "1", "--minibroker-trace",
                                           "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "minibroker trace" in out
    section = out[out.index("minibroker trace"):]
    assert "→ Produce v" in section and "failing" in section
    assert "(kafka-python/" in section or "ApiVersions" in section


def test_strict_mode_fails_the_test_that_broke_a_rule(pytester):
    pytester.makepyfile(test_strict="""
        import socket, struct

        def test_well_behaved(minibroker_cluster):
            minibroker_cluster.create_topic("ok", 1, 1)
            assert minibroker_cluster.violations == []

        def test_uses_a_version_not_negotiated(minibroker_cluster):
            from kafka.protocol.metadata import ApiVersionsRequest
            from minibroker.network.client import encode_request
            host, port = minibroker_cluster.bootstrap.split(",")[0].rsplit(":", 1)
            s = socket.create_connection((host, int(port)), timeout=30)
            s.sendall(b"".join(bytes(p) for p in encode_request(ApiVersionsRequest(), 0, 1,
                                                                "rude")))
            size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
            s.recv(size, socket.MSG_WAITALL)
            s.sendall(struct.pack(">ihhih", 14, 3, 99, 2, 4) + b"rude")     # Metadata v99
            assert s.recv(1) == b""                                      # closed, as Kafka does
            s.close()
    """)
    result = pytester.runpytest_subprocess("--minibroker-brokers", "1", "--minibroker-strict",
                                           "-p", "no:cacheprovider", timeout=120)
    result.assert_outcomes(passed=1, failed=1)
    assert "version-not-negotiated by 'rude' (Metadata v99)" in result.stdout.str()


def test_a_sasl_ssl_fixture_in_ten_lines(pytester):
    """docs/security.md's fixture, as a client's suite would write it."""
    pytester.makeconftest("""
        import pytest
        from minibroker.testing import security_config

        @pytest.fixture(scope="session")
        def minibroker_config(tmp_path_factory):
            return security_config("SASL_SSL", tls_dir=tmp_path_factory.mktemp("tls"),
                                   users=["alice:alice-secret"])
    """)
    pytester.makepyfile(test_client="""
        import pytest
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        def settings(cluster, password):
            return dict(bootstrap_servers=cluster.bootstrap, security_protocol="SASL_SSL",
                        ssl_cafile=cluster.ca_file, sasl_mechanism="SCRAM-SHA-256",
                        sasl_plain_username="alice", sasl_plain_password=password)

        def test_authenticated(minibroker_cluster):
            p = KafkaProducer(**settings(minibroker_cluster, "alice-secret"))
            p.send("t", b"hello").get(30)
            p.close()

        def test_wrong_password(minibroker_cluster):
            with pytest.raises(KafkaError):
                KafkaProducer(bootstrap_timeout_ms=3000,
                              **settings(minibroker_cluster, "wrong")).send("t", b"x").get(5)
    """)
    result = pytester.runpytest_subprocess("--minibroker-brokers", "1", "-p", "no:cacheprovider",
                                           timeout=120)
    result.assert_outcomes(passed=2)
