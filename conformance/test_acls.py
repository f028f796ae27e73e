"""ACLs with real clients: librdkafka's own authorization tests and the admin clients' ACL calls.

- 0115 (librdkafka tests/0115-producer_auth.cpp): a topic gets `--deny-principal User:* --operation
  All`; produce() then gets TOPIC_AUTHORIZATION_FAILED delivery reports, and afterwards fails at
  once, whether the producer knew the topic before or not.
- 0119 (tests/0119-consumer_auth.cpp): `--allow-principal User:* --operation Describe` and
  `--deny-principal User:* --operation Read` on a topic of 3 partitions holding 1000 messages; a
  subscribed consumer sees exactly one TOPIC_AUTHORIZATION_FAILED per partition and no message.
Both run as librdkafka's do without authentication (PLAINTEXT, every client User:ANONYMOUS),
against a cluster with `authorizer.class.name` set and `allow.everyone.if.no.acl.found=true`,
the ACLs set with `minibroker acls` where the tests call kafka-acls.sh.
- kafka-python raising TopicAuthorizationFailedError and GroupAuthorizationFailedError;
- create/describe/delete ACL round trips with confluent-kafka's AdminClient and kafka-python's
  KafkaAdminClient.
"""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.timeout(180), pytest.mark.clients("confluent", "kafka_python")]
STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def acl_cluster():
    with ThreadedCluster(brokers=3, authorizer_class_name=STANDARD,
                         allow_everyone_if_no_acl_found=True,
                         group_initial_rebalance_delay_ms=0) as tc:
        yield tc


def kafka_acls(bootstrap: str, *args: str) -> None:
    """`kafka-acls.sh --bootstrap-server ... ARGS` as the librdkafka tests run it."""
    r = subprocess.run([sys.executable, "-m", "minibroker", "acls", "--bootstrap-server",
                        bootstrap, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def _0115(tc, topic_known: bool) -> None:
    confluent_kafka = pytest.importorskip("confluent_kafka")
    topic = f"0115-unauthorized-{int(topic_known)}"
    tc.create_topic(topic, 3, 1)
    reports = []
    p = confluent_kafka.Producer({"bootstrap.servers": tc.bootstrap, "linger.ms": 0,
                                 "message.timeout.ms": 20000})
    expected = 0
    if topic_known:
        p.produce(topic, b"0", on_delivery=lambda err, msg: reports.append(err))
        assert p.flush(30) == 0
        assert reports == [None]
        reports.clear()
    kafka_acls(tc.bootstrap, "--add", "--deny-principal", "User:*", "--operation", "All",
               "--deny-host", "*", "--topic", topic)
    time.sleep(1)                                   # "Allow ACLs to propagate", as the test
    p.produce(topic, b"1", on_delivery=lambda err, msg: reports.append(err))
    p.produce(topic, b"3", partition=0, on_delivery=lambda err, msg: reports.append(err))
    expected += 2
    assert p.flush(30) == 0
    assert [e.code() for e in reports] == [
        confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED] * expected
    for kw in ({}, {"partition": 0}):           # now refused at once
        with pytest.raises(confluent_kafka.KafkaException) as e:
            p.produce(topic, b"4", **kw)
        assert e.value.args[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    p.flush(10)


def test_0115_producer_auth_topic_known(acl_cluster):
    _0115(acl_cluster, True)


def test_0115_producer_auth_topic_not_known(acl_cluster):
    _0115(acl_cluster, False)


def test_0119_consumer_auth(acl_cluster):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    tc, topic = acl_cluster, "0119-fetch_unauth"
    tc.create_topic(topic, 3, 1)
    p = confluent_kafka.Producer({"bootstrap.servers": tc.bootstrap})
    for i in range(1000):
        p.produce(topic, b"%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    kafka_acls(tc.bootstrap, "--add", "--allow-principal", "User:*", "--operation", "Describe",
               "--allow-host", "*", "--topic", topic)
    kafka_acls(tc.bootstrap, "--add", "--deny-principal", "User:*", "--operation", "Read",
               "--deny-host", "*", "--topic", topic)
    time.sleep(1)
    c = confluent_kafka.Consumer({"bootstrap.servers": tc.bootstrap, "group.id": topic,
                                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    errors = []
    try:
        for _ in range(30):                         # 15 s, as the test
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is not None, "did not expect a valid message"
            assert msg.error().code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED, \
                msg.error()
            errors.append(msg.partition())
    finally:
        c.close()
    assert sorted(errors) == [0, 1, 2]
    kafka_acls(tc.bootstrap, "--remove", "--force", "--allow-principal", "User:*", "--operation",
               "Describe", "--allow-host", "*", "--topic", topic)
    kafka_acls(tc.bootstrap, "--remove", "--force", "--deny-principal", "User:*", "--operation",
               "Read", "--deny-host", "*", "--topic", topic)


def test_confluent_admin_acl_round_trip(acl_cluster):
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    A = admin_mod
    admin = A.AdminClient({"bootstrap.servers": acl_cluster.bootstrap})
    bindings = [
        A.AclBinding(A.ResourceType.TOPIC, "ck-orders", A.ResourcePatternType.LITERAL,
                     "User:alice", "*", A.AclOperation.READ, A.AclPermissionType.ALLOW),
        A.AclBinding(A.ResourceType.GROUP, "ck-", A.ResourcePatternType.PREFIXED,
                     "User:alice", "10.0.0.1", A.AclOperation.ALL, A.AclPermissionType.DENY)]
    for f in admin.create_acls(bindings).values():
        assert f.result(30) is None
    any_alice = A.AclBindingFilter(A.ResourceType.ANY, None, A.ResourcePatternType.ANY,
                                   "User:alice", None, A.AclOperation.ANY,
                                   A.AclPermissionType.ANY)
    assert sorted(map(str, admin.describe_acls(any_alice).result(30))) == sorted(
        map(str, bindings))
    deleted = admin.delete_acls([any_alice])[any_alice].result(30)
    assert sorted(map(str, deleted)) == sorted(map(str, bindings))
    assert admin.describe_acls(any_alice).result(30) == []


def test_kafka_python_admin_acl_round_trip(acl_cluster):
    kafka_admin = pytest.importorskip("kafka.admin")
    K = kafka_admin
    admin = K.KafkaAdminClient(bootstrap_servers=acl_cluster.bootstrap)
    try:
        acl = K.ACL(principal="User:bob", host="*", operation=K.ACLOperation.WRITE,
                    permission_type=K.ACLPermissionType.ALLOW,
                    resource_pattern=K.ResourcePattern(K.ResourceType.TOPIC, "kp-t"))
        created = admin.create_acls([acl])
        assert len(created["succeeded"]) == 1 and created["failed"] == []
        f = K.ACLFilter(principal="User:bob", host="*", operation=K.ACLOperation.ANY,
                        permission_type=K.ACLPermissionType.ANY,
                        resource_pattern=K.ResourcePatternFilter(K.ResourceType.ANY, None,
                                                                 K.ACLResourcePatternType.ANY))
        acls, error = admin.describe_acls(f)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in acls] == [
            ("User:bob", K.ACLOperation.WRITE, "kp-t")]
        [(flt, matched, err)] = admin.delete_acls([f])
        assert err.errno == 0 and [m.principal for m in matched] == ["User:bob"]
        acls, _ = admin.describe_acls(f)
        assert acls == []
    finally:
        admin.close()


def test_kafka_python_sees_kafkas_authorization_errors(acl_cluster):
    """kafka-python raises its own classes for the codes: a denied topic on send, a denied
    group on the consumer's join."""
    kafka = pytest.importorskip("kafka")
    errors = pytest.importorskip("kafka.errors")
    tc = acl_cluster
    tc.create_topic("kp-denied", 1, 1)
    tc.create_topic("kp-open", 1, 1)
    kafka_acls(tc.bootstrap, "--add", "--deny-principal", "User:*", "--operation", "Write",
               "--topic", "kp-denied")
    kafka_acls(tc.bootstrap, "--add", "--deny-principal", "User:*", "--operation", "Read",
               "--group", "kp-group")
    time.sleep(1)
    p = kafka.KafkaProducer(bootstrap_servers=tc.bootstrap, retries=0)
    try:
        with pytest.raises(errors.TopicAuthorizationFailedError):
            p.send("kp-denied", b"x").get(timeout=30)
        assert p.send("kp-open", b"x").get(timeout=30).offset == 0
    finally:
        p.close()
    c = kafka.KafkaConsumer("kp-open", bootstrap_servers=tc.bootstrap, group_id="kp-group",
                            auto_offset_reset="earliest", consumer_timeout_ms=10000)
    try:
        with pytest.raises(errors.GroupAuthorizationFailedError):
            for _ in c:
                break
    finally:
        c.close()
