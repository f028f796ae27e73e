"""The authorizer alone: Kafka's StandardAuthorizer decisions (StandardAuthorizerTest's cases)."""
from __future__ import annotations

import pytest

from minibroker.config import ClusterConfig
from minibroker.security.acl import (AclBinding, AclBindingFilter, AclOperation as Op,
                                     AclPermissionType as Perm, PatternType as PT,
                                     ResourceType as RT)
from minibroker.security.authorizer import (StandardAuthorizer, authorizer_from_config,
                                            parse_super_users)
from minibroker.security.principal import KafkaPrincipal

ALICE = KafkaPrincipal("User", "alice")
BOB = KafkaPrincipal("User", "bob")
HOST = "127.0.0.1"


def acl(rt=RT.TOPIC, name="t", pt=PT.LITERAL, principal="User:alice", host="*", op=Op.READ,
        perm=Perm.ALLOW) -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


def authz(*acls, super_users=(), allow_if_none=False) -> StandardAuthorizer:
    a = StandardAuthorizer(super_users, allow_if_none)
    a.set_acls(acls)
    return a


def test_no_acls_denies_by_default_and_allows_with_allow_everyone():
    assert not authz().authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert authz(allow_if_none=True).authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")


def test_allow_everyone_applies_only_when_no_acl_matches_the_resource():
    # An ACL on the topic for bob: alice finds an ACL for the resource, so she is denied.
    a = authz(acl(principal="User:bob"), allow_if_none=True)
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert a.authorize(BOB, HOST, Op.READ, RT.TOPIC, "t")
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "other")      # no ACL applies there


def test_literal_prefixed_and_wildcard_names():
    a = authz(acl(name="orders"), acl(name="pay", pt=PT.PREFIXED, op=Op.WRITE),
              acl(name="*", op=Op.DESCRIBE, principal="User:bob"))
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders2")   # literal is exact
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "payments")
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "pay")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "pa")
    assert a.authorize(BOB, HOST, Op.DESCRIBE, RT.TOPIC, "anything")
    assert not a.authorize(BOB, HOST, Op.DESCRIBE, RT.GROUP, "anything")    # other type


def test_deny_wins_over_allow_and_deny_implies_nothing():
    a = authz(acl(op=Op.ALL), acl(op=Op.WRITE, perm=Perm.DENY))
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t")
    # A DENY of READ does not deny DESCRIBE (the ALL allow gives it).
    b = authz(acl(op=Op.DESCRIBE), acl(op=Op.READ, perm=Perm.DENY))
    assert b.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")
    # A DENY ALL denies every operation; a prefixed deny beats a literal allow.
    c = authz(acl(op=Op.ALL), acl(name="t", pt=PT.PREFIXED, op=Op.ALL, perm=Perm.DENY))
    for op in (Op.READ, Op.DESCRIBE, Op.ALTER_CONFIGS):
        assert not c.authorize(ALICE, HOST, op, RT.TOPIC, "t")


@pytest.mark.parametrize("allowed,asked,ok", [
    (Op.READ, Op.DESCRIBE, True), (Op.WRITE, Op.DESCRIBE, True), (Op.DELETE, Op.DESCRIBE, True),
    (Op.ALTER, Op.DESCRIBE, True), (Op.CREATE, Op.DESCRIBE, False),
    (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True), (Op.ALTER_CONFIGS, Op.DESCRIBE, False),
    (Op.DESCRIBE, Op.READ, False), (Op.READ, Op.WRITE, False), (Op.ALL, Op.IDEMPOTENT_WRITE, True),
    (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False)])
def test_implied_operations(allowed, asked, ok):
    assert authz(acl(op=allowed)).authorize(ALICE, HOST, asked, RT.TOPIC, "t") is ok


def test_hosts_and_wildcard_principal():
    a = authz(acl(host="10.0.0.1"), acl(principal="User:*", op=Op.WRITE))
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    assert a.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "t")
    # As Kafka's matchingPrincipals: User:* matches a principal of any type.
    assert a.authorize(KafkaPrincipal("Group", "x"), HOST, Op.WRITE, RT.TOPIC, "t")


def test_super_users_are_allowed_everything():
    a = authz(acl(op=Op.ALL, perm=Perm.DENY, principal="User:*"),
              super_users=parse_super_users("User:admin; User:ops"))
    assert a.authorize(KafkaPrincipal("User", "admin"), HOST, Op.ALTER, RT.CLUSTER, "kafka-cluster")
    assert a.authorize(KafkaPrincipal("User", "ops"), HOST, Op.WRITE, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "t")


def test_decisions_follow_acl_changes():
    a = authz()
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    a.set_acls([acl()])
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    a.set_acls([])
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")


def test_authorize_by_resource_type():
    assert not authz().authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert authz(acl(name="x", op=Op.WRITE)).authorize_by_resource_type(
        ALICE, HOST, Op.WRITE, RT.TOPIC)
    # The only allow is covered by a prefixed deny: denied.
    assert not authz(acl(name="xy", op=Op.WRITE),
                     acl(name="x", pt=PT.PREFIXED, op=Op.WRITE, perm=Perm.DENY)
                     ).authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not authz(acl(name="*", op=Op.WRITE, perm=Perm.DENY), acl(name="x", op=Op.WRITE)
                     ).authorize_by_resource_type(ALICE, HOST, Op.WRITE, RT.TOPIC)


def test_authorized_operations():
    a = authz(acl(op=Op.WRITE), acl(op=Op.ALTER_CONFIGS))
    assert a.authorized_operations(ALICE, HOST, RT.TOPIC, "t") == {
        int(Op.WRITE), int(Op.DESCRIBE), int(Op.ALTER_CONFIGS), int(Op.DESCRIBE_CONFIGS)}
    assert a.authorized_operations(ALICE, HOST, RT.GROUP, "g") == frozenset()


def test_filters_like_kafka():
    lit, pre, wild = acl(name="foo"), acl(name="fo", pt=PT.PREFIXED), acl(name="*")
    grp = acl(rt=RT.GROUP, name="foo")
    all_ = [lit, pre, wild, grp]

    def match(**kw):
        return [a for a in all_ if AclBindingFilter(**kw).matches(a)]
    assert match() == all_
    assert match(resource_type=RT.TOPIC, resource_name="foo") == [lit]
    assert match(resource_type=RT.TOPIC, resource_name="foo", pattern_type=PT.MATCH) == [
        lit, pre, wild]
    assert match(pattern_type=PT.PREFIXED) == [pre]
    assert match(principal="User:bob") == []
    assert match(operation=Op.READ, permission_type=Perm.ALLOW, host="*") == all_
    assert AclBindingFilter(operation=Op.UNKNOWN).invalid()


def test_binding_validation():
    assert acl().invalid() is None
    assert "principal" in acl(principal="alice").invalid()
    assert acl(rt=RT.CLUSTER, name="x").invalid()
    assert acl(rt=RT.CLUSTER, name="kafka-cluster").invalid() is None
    assert acl(op=Op.ANY).invalid() and acl(pt=PT.MATCH).invalid() and acl(rt=RT.ANY).invalid()
    assert acl(perm=Perm.ANY).invalid() and acl(name="").invalid()


def test_config_turns_it_on():
    assert authorizer_from_config("", "", False) is None
    on = ClusterConfig(authorizer_class_name="org.apache.kafka.metadata.authorizer."
                       "StandardAuthorizer", super_users="User:a;User:b",
                       allow_everyone_if_no_acl_found=True)
    a = authorizer_from_config(on.authorizer_class_name, on.super_users,
                               on.allow_everyone_if_no_acl_found)
    assert a.super_users == {"User:a", "User:b"} and a.allow_everyone_if_no_acl_found
    with pytest.raises(ValueError, match="authorizer.class.name"):
        ClusterConfig(authorizer_class_name="com.example.Nope")
