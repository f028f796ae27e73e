"""`serve`'s security shortcuts, as a user runs them: --security-protocol SASL_SSL with --tls-dir
and --user, a real client authenticating with SCRAM over TLS, the CA path printed, and a wrong
password refused with the client's authentication error."""
from __future__ import annotations

import logging

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import KafkaError

from serve_helpers import cli, serve

pytestmark = pytest.mark.timeout(120)


def test_sasl_ssl_shortcuts(tmp_path, caplog):
    tls = tmp_path / "tls"
    with serve("--brokers", "1", "--security-protocol", "SASL_SSL", "--tls-dir", str(tls),
               "--user", "alice:alice-secret", "--sasl-mechanisms", "SCRAM-SHA-512,PLAIN",
               "--super-user", "alice", "--acls") as (bootstrap, p):
        assert p.stdout.readline().strip() == f"CA {tls / 'ca.pem'}"
        common = dict(bootstrap_servers=bootstrap, security_protocol="SASL_SSL",
                      ssl_cafile=str(tls / "ca.pem"), sasl_mechanism="SCRAM-SHA-512",
                      sasl_plain_username="alice")
        producer = KafkaProducer(sasl_plain_password="alice-secret", **common)
        producer.send("t", b"over SASL_SSL").get(30)
        producer.close()
        # kafka-python retries the bootstrap, logging the broker's error each time.
        caplog.set_level(logging.INFO, "kafka")
        with pytest.raises(KafkaError) as raised:
            KafkaAdminClient(sasl_plain_password="wrong", bootstrap_timeout_ms=4000,
                             request_timeout_ms=3000, **common)
        assert ("SaslAuthenticationFailedError: Authentication failed during authentication due "
                "to invalid credentials with SASL mechanism SCRAM-SHA-512") in caplog.text + str(raised.value)
    assert sorted(x.name for x in tls.iterdir()) == ["broker.pem", "ca-key.pem", "ca.pem"]


def test_describe_configs_hides_passwords_and_shows_the_security_configs(tmp_path):
    # The describing client is User:ANONYMOUS (PLAINTEXT): a super user here, as the authorizer
    # is on (--acls) and it needs DESCRIBE_CONFIGS on the cluster.
    with serve("--brokers", "1", "--user", "bob:pw", "--super-user", "bob", "--super-user",
               "carol", "--super-user", "ANONYMOUS", "--acls",
               "--override", "ssl.keystore.password=hunter2") as (bootstrap, _):
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        resp = admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                      config_filter="all")
        admin.close()
        (entries,) = [v for by_name in resp.values() for v in by_name.values()]
        assert entries["super.users"]["value"] == "User:bob;User:carol;User:ANONYMOUS"
        assert entries["allow.everyone.if.no.acl.found"]["value"] == "false"
        assert entries["authorizer.class.name"]["value"] == \
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        assert entries["ssl.keystore.password"]["value"] is None
        assert "hunter2" not in repr(resp)


def _listener(p, name: str) -> str:
    for _ in range(10):
        word, _, rest = p.stdout.readline().strip().partition(" ")
        if word == "LISTENER" and rest.split()[0] == name:
            return rest.split()[1]
    raise AssertionError(f"no LISTENER {name} line")


def test_configs_users_manages_scram_credentials(caplog):
    listeners = "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
    with serve("--brokers", "1", "--user", "alice:alice-secret", "--override", listeners) \
            as (bootstrap, p):
        sasl = _listener(p, "SASL_PLAINTEXT")

        def configs(*args):
            return cli(bootstrap, "configs", "--entity-type", "users", *args)

        def login(user, password):
            return KafkaProducer(bootstrap_servers=sasl, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user,
                                 sasl_plain_password=password, bootstrap_timeout_ms=4000)
        out = configs("--alter", "--entity-name", "bob", "--add-config",
                      "SCRAM-SHA-256=[iterations=8192,password=bob-secret]")
        assert out.stdout == "Completed updating config for user bob.\n", out.stderr
        out = configs("--describe")
        assert out.stdout.splitlines() == [
            "SCRAM credential configs for user-principal 'alice' are "
            "SCRAM-SHA-256=iterations=4096,SCRAM-SHA-512=iterations=4096",
            "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=8192"]
        login("bob", "bob-secret").close()
        out = configs("--alter", "--entity-name", "bob", "--delete-config", "SCRAM-SHA-256")
        assert out.returncode == 0, out.stderr
        out = configs("--describe", "--entity-name", "bob")
        assert out.returncode != 0 and "ResourceNotFoundError" in out.stderr
        with pytest.raises(KafkaError):
            login("bob", "bob-secret")
        out = configs("--alter", "--entity-name", "carol", "--add-config",
                      "SCRAM-SHA-512=[iterations=100,password=x]")
        assert "UnacceptableCredentialError" in out.stderr and "Too few iterations" in out.stderr
