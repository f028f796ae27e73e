"""`minibroker acls` against a served cluster with the authorizer on: kafka-acls.sh's flags and
its output, each change checked with what confluent-kafka's AdminClient (librdkafka) sees."""
from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ResourcePatternType, ResourceType)

from serve_helpers import cli, serve

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(240)]
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def served():
    # Every client here is User:ANONYMOUS (PLAINTEXT): it is the super user.
    with serve("--override", f"authorizer.class.name={STANDARD}",
               "--override", "super.users=User:ANONYMOUS") as (bootstrap, _):
        yield bootstrap


def seen(bootstrap: str) -> list[tuple]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    f = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                         AclOperation.ANY, AclPermissionType.ANY)
    return sorted((b.restype.name, b.name, b.resource_pattern_type.name, b.principal, b.host,
                   b.operation.name, b.permission_type.name)
                  for b in admin.describe_acls(f).result(30))


def test_add_list_remove(served):
    r = cli(served, "acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
            "--operation", "Describe", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    r = cli(served, "acls", "--add", "--deny-principal", "User:bob", "--deny-host", "10.0.0.9",
            "--topic", "pay", "--resource-pattern-type", "prefixed")
    assert r.returncode == 0, r.stderr
    r = cli(served, "acls", "--list", "--topic", "orders")
    assert r.stdout == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n")
    assert seen(served) == sorted([
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"),
        ("TOPIC", "pay", "PREFIXED", "User:bob", "10.0.0.9", "ALL", "DENY")])
    r = cli(served, "acls", "--list", "--principal", "User:bob")
    assert r.stdout.splitlines()[:2] == [
        "ACLs for principal `User:bob`",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=pay, "
        "patternType=PREFIXED)`: "]
    # --remove asks first: "n" keeps them, --force does not ask.
    p = subprocess.run([sys.executable, "-m", "minibroker", "acls", "--bootstrap-server",
                        served, "--remove", "--topic", "orders"], input="n\n",
                       capture_output=True, text=True, timeout=60)
    assert "Are you sure you want to delete all ACLs for resource filter `ResourcePattern(" \
           "resourceType=TOPIC, name=orders, patternType=LITERAL)`? (y/n)" in p.stdout
    assert len(seen(served)) == 3
    r = cli(served, "acls", "--remove", "--force", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    r = cli(served, "acls", "--remove", "--force", "--deny-principal", "User:bob",
            "--deny-host", "10.0.0.9", "--topic", "pay", "--resource-pattern-type", "PREFIXED")
    assert r.returncode == 0, r.stderr
    assert seen(served) == []


def test_producer_and_consumer_shortcuts(served):
    r = cli(served, "acls", "--add", "--allow-principal", "User:p", "--producer", "--topic", "t",
            "--transactional-id", "tx", "--idempotent")
    assert r.returncode == 0, r.stderr
    r = cli(served, "acls", "--add", "--allow-principal", "User:c", "--consumer", "--topic", "t",
            "--group", "g")
    assert r.returncode == 0, r.stderr
    assert seen(served) == sorted([
        ("TOPIC", "t", "LITERAL", "User:p", "*", op, "ALLOW") for op in
        ("WRITE", "DESCRIBE", "CREATE")] + [
        ("TRANSACTIONAL_ID", "tx", "LITERAL", "User:p", "*", op, "ALLOW") for op in
        ("WRITE", "DESCRIBE")] + [
        ("BROKER", "kafka-cluster", "LITERAL", "User:p", "*", "IDEMPOTENT_WRITE", "ALLOW"),
        ("TOPIC", "t", "LITERAL", "User:c", "*", "READ", "ALLOW"),
        ("TOPIC", "t", "LITERAL", "User:c", "*", "DESCRIBE", "ALLOW"),
        ("GROUP", "g", "LITERAL", "User:c", "*", "READ", "ALLOW")])
    r = cli(served, "acls", "--remove", "--force", "--topic", "t", "--group", "g",
            "--transactional-id", "tx", "--cluster")
    assert r.returncode == 0, r.stderr
    assert seen(served) == []


@pytest.mark.parametrize("args,message", [
    (["--add", "--topic", "t"], "You must specify one of: --allow-principal, --deny-principal"),
    (["--add", "--allow-principal", "User:a"], "You must provide at least one resource"),
    (["--list", "--add"], "exactly one action"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "Type:name"),
    (["--add", "--allow-principal", "User:a", "--operation", "Read", "--cluster"],
     "ResourceType CLUSTER only supports operations"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "MATCH"],
     "not valid when adding acls"),
    (["--add", "--allow-principal", "User:a", "--consumer", "--topic", "t"], "--consumer"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
     "Unknown operation"),
])
def test_mistakes_are_one_line(served, args, message):
    r = cli(served, "acls", *args)
    assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert seen(served) == []


def test_without_an_authorizer_the_error_is_kafkas():
    with serve() as (bootstrap, _):
        r = cli(bootstrap, "acls", "--list")
        assert r.returncode == 1 and "SecurityDisabled" in r.stderr, r.stderr
