"""minibroker's own tools and reference client against a secured listener, configured as Kafka's
tools are: a --command-config file with security.protocol, ssl.* and sasl.* (Java names, with a
PEM truststore and a JAAS line, or librdkafka's names), or the console tools' --producer.config.
A wrong password is one line naming the authentication failure, not a hang."""
from __future__ import annotations

import asyncio

import pytest

from minibroker.client import Admin
from minibroker.client.security import SecurityConfigError, from_properties

from serve_helpers import cli, serve

pytestmark = pytest.mark.timeout(180)

JAAS = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
        "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
        "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def _props(path, **kv) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in kv.items()))
    return str(path)


def java_style(tmp_path, ca, mechanism: str, password: str = "alice-secret") -> str:
    return _props(tmp_path / f"{mechanism}.properties", **{
        "security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM",
        "ssl.truststore.location": ca, "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{JAAS[mechanism]} required username="alice" password="{password}";'})


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    tls = tmp_path_factory.mktemp("tls")
    with serve("--security-protocol", "SASL_SSL", "--tls-dir", str(tls),
               "--user", "alice:alice-secret") as (bootstrap, p):
        assert p.stdout.readline().strip() == f"CA {tls / 'ca.pem'}"
        yield bootstrap, str(tls / "ca.pem")


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_admin_tools_over_sasl_ssl_with_a_command_config(secured, tmp_path, mechanism):
    bootstrap, ca = secured
    config = java_style(tmp_path, ca, mechanism)
    topic = f"secured-{mechanism.lower()}"
    made = cli(bootstrap, "topics", "--command-config", config, "--create", "--topic", topic,
               "--partitions", "2", "--replication-factor", "3")
    assert made.returncode == 0, made.stderr
    listed = cli(bootstrap, "topics", "--command-config", config, "--list")
    assert topic in listed.stdout.split(), listed.stderr


def test_librdkafka_names_and_oauthbearer(secured, tmp_path):
    bootstrap, ca = secured
    rdkafka = _props(tmp_path / "rd.properties", **{
        "security.protocol": "SASL_SSL", "ssl.ca.location": ca, "sasl.mechanisms": "PLAIN",
        "sasl.username": "alice", "sasl.password": "alice-secret"})
    oauth = _props(tmp_path / "oauth.properties", **{
        "security.protocol": "SASL_SSL", "ssl.ca.location": ca, "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                            'required unsecuredLoginStringClaim_sub="alice";'})
    for config in (rdkafka, oauth):
        out = cli(bootstrap, "topics", "--command-config", config, "--list")
        assert out.returncode == 0, out.stderr


def test_console_tools_round_trip_over_sasl_ssl(secured, tmp_path):
    bootstrap, ca = secured
    config = java_style(tmp_path, ca, "SCRAM-SHA-512")
    sent = cli(bootstrap, "console-producer", "--topic", "secured-console", "--producer.config",
               config, input_text="one\ntwo\n")
    assert sent.returncode == 0, sent.stderr
    got = cli(bootstrap, "console-consumer", "--topic", "secured-console", "--from-beginning",
              "--max-messages", "2", "--timeout-ms", "20000", "--consumer.config", config)
    assert got.stdout.split() == ["one", "two"], got.stderr


def test_a_wrong_password_or_plaintext_is_one_clear_line(secured, tmp_path):
    bootstrap, ca = secured
    wrong = cli(bootstrap, "topics", "--command-config",
                java_style(tmp_path, ca, "SCRAM-SHA-256", password="nope"), "--list",
                "--timeout-ms", "10000")
    assert wrong.returncode != 0
    assert "authentication failed" in wrong.stderr and "SCRAM-SHA-256" in wrong.stderr, wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1, wrong.stderr
    plain = cli(bootstrap, "topics", "--list", "--timeout-ms", "5000")
    assert plain.returncode != 0 and "ApiVersions" in plain.stderr, plain.stderr


def test_the_reference_admin_client_authenticates(secured):
    bootstrap, ca = secured
    sec = from_properties({"security.protocol": "SASL_SSL", "ssl.ca.location": ca,
                           "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                           "sasl.password": "alice-secret"})

    async def go():
        async with Admin(bootstrap, security=sec) as admin:
            await admin.create_topics([("secured-admin", 3, 3)])
            await admin.metadata.fetch_all()
            return sorted(admin.metadata.brokers), await admin.list_topics()
    brokers, topics = asyncio.run(go())
    assert len(brokers) == 3 and topics.get("secured-admin") == 3


@pytest.mark.parametrize("props, why", [
    ({"security.protocol": "SASL_SSL"}, "GSSAPI"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs a user"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "PEM"),
    ({"security.protocol": "TLS"}, "must be one of"),
])
def test_settings_that_cannot_be_honoured_are_refused(props, why):
    with pytest.raises(SecurityConfigError, match=why):
        from_properties(props)
