"""CreateAcls / DescribeAcls / DeleteAcls over the wire: Kafka's errors, ACLs as metadata records
replicated to every broker and replayed by the next controller, and the Admin client."""
from __future__ import annotations

import asyncio

import pytest
from kafka.errors import (ClusterAuthorizationFailedError, InvalidRequestError,
                          SecurityDisabledError)
from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from minibroker.client.admin import Admin
from minibroker.cluster import Cluster
from minibroker.controller import snapshot
from minibroker.protocol import records as R
from minibroker.security.acl import (AclBinding, AclBindingFilter, AclOperation as Op,
                                     AclPermissionType as Perm, PatternType as PT,
                                     ResourceType as RT)
from minibroker.security.principal import KafkaPrincipal
from tests.security.acl_helpers import STANDARD, allow, connect_as, deny

pytestmark = pytest.mark.timeout(60)
ALICE_READ = allow("User:alice", Op.READ, RT.TOPIC, "t")
PREFIX_WRITE = allow("User:alice", Op.WRITE, RT.TOPIC, "pay", PT.PREFIXED)
GROUP_DENY = deny("User:*", Op.READ, RT.GROUP, "g")


def creation(b: AclBinding):
    return CreateAclsRequest.AclCreation(
        resource_type=int(b.resource_type), resource_name=b.resource_name,
        resource_pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
        operation=int(b.operation), permission_type=int(b.permission_type))


def describe_all(**kw):
    f = dict(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
             principal_filter=None, host_filter=None, operation=1, permission_type=1)
    f.update(kw)
    return DescribeAclsRequest(**f)


async def until(cond, what: str):
    for _ in range(500):
        if cond():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def test_without_an_authorizer_every_acl_api_is_security_disabled():
    async with Cluster(brokers=1) as c:
        conn = connect_as(c.brokers[1], "User:admin")
        r = await conn.request(CreateAclsRequest(creations=[creation(ALICE_READ)]), 3)
        assert [(x.error_code, x.error_message) for x in r.results] == [
            (SecurityDisabledError.errno, "No Authorizer is configured.")]
        r = await conn.request(describe_all(), 3)
        assert (r.error_code, r.resources) == (SecurityDisabledError.errno, [])
        r = await conn.request(DeleteAclsRequest(filters=[]), 3)
        assert r.filter_results == []
        assert not any(isinstance(rec, R.AccessControlEntryRecord)
                       for _, rec in c.metadata_log.read_all())


async def test_acls_are_records_replicated_to_every_broker_and_replayed():
    async with Cluster(brokers=3, authorizer_class_name=STANDARD,
                       super_users="User:admin") as c:
        admin = connect_as(c.brokers[2], "User:admin")
        r = await admin.request(CreateAclsRequest(creations=[
            creation(ALICE_READ), creation(PREFIX_WRITE), creation(GROUP_DENY),
            creation(ALICE_READ)]), 3)
        assert [x.error_code for x in r.results] == [0, 0, 0, 0]
        records = [rec for _, rec in c.metadata_log.read_all()
                   if isinstance(rec, R.AccessControlEntryRecord)]
        assert len(records) == 3                    # the duplicate wrote nothing
        want = sorted([ALICE_READ, PREFIX_WRITE, GROUP_DENY])
        for b in c.brokers.values():
            await until(lambda b=b: list(b.authorizer.acls) == want, "every broker has them")
        assert c.brokers[3].authorizer.authorize(KafkaPrincipal("User", "alice"), "memory",
                                                 Op.WRITE, RT.TOPIC, "payments")
        r = await admin.request(describe_all(resource_type_filter=int(RT.TOPIC)), 3)
        assert r.error_code == 0
        assert [(x.resource_type, x.resource_name, x.pattern_type,
                 [(a.principal, a.host, a.operation, a.permission_type) for a in x.acls])
                for x in r.resources] == [
            (2, "pay", 4, [("User:alice", "*", 4, 3)]), (2, "t", 3, [("User:alice", "*", 3, 3)])]
        # MATCH: the ACLs that apply to topic "payments".
        r = await admin.request(describe_all(resource_type_filter=2, resource_name_filter=
                                             "payments", pattern_type_filter=2), 3)
        assert [x.resource_name for x in r.resources] == ["pay"]
        # A new controller replays them from the metadata log.
        old = c.controller_node_id
        await c.stop_broker(old)
        assert c.controller_node_id not in (-1, old)
        image = (await c.active_controller()).image
        assert sorted(image.acls.values()) == want
        again = snapshot.from_text(snapshot.to_text(image))     # a snapshot keeps them
        assert again.acls == image.acls
        assert [a.operation.name for a in sorted(again.acls.values())] == ["WRITE", "READ", "READ"]
        f = DeleteAclsRequest.DeleteAclsFilter
        live = next(i for i in c.brokers if i != old)
        admin = connect_as(c.brokers[live], "User:admin")
        r = await admin.request(DeleteAclsRequest(filters=[f(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter="User:alice", host_filter=None, operation=1, permission_type=1)]), 3)
        [res] = r.filter_results
        assert res.error_code == 0
        assert sorted((m.resource_name, m.operation) for m in res.matching_acls) == [
            ("pay", 4), ("t", 3)]
        await until(lambda: list(c.brokers[live].authorizer.acls) == [GROUP_DENY], "deleted")


async def test_errors_as_kafka():
    async with Cluster(brokers=1, authorizer_class_name=STANDARD,
                       super_users="User:admin") as c:
        b = c.brokers[1]
        stranger = connect_as(b, "User:mallory")
        r = await stranger.request(CreateAclsRequest(creations=[creation(ALICE_READ)]), 3)
        assert [x.error_code for x in r.results] == [ClusterAuthorizationFailedError.errno]
        r = await stranger.request(describe_all(), 3)
        assert r.error_code == ClusterAuthorizationFailedError.errno
        r = await stranger.request(DeleteAclsRequest(filters=[
            DeleteAclsRequest.DeleteAclsFilter(
                resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                principal_filter=None, host_filter=None, operation=1, permission_type=1)]), 3)
        assert [x.error_code for x in r.filter_results] == [ClusterAuthorizationFailedError.errno]
        assert b.authorizer.acls == ()
        admin = connect_as(b, "User:admin")
        bad = [AclBinding(RT.CLUSTER, "other", PT.LITERAL, "User:a", "*", Op.ALTER, Perm.ALLOW),
               AclBinding(RT.TOPIC, "t", PT.LITERAL, "alice", "*", Op.READ, Perm.ALLOW),
               AclBinding(RT.TOPIC, "t", PT.MATCH, "User:a", "*", Op.READ, Perm.ALLOW),
               AclBinding(RT.TOPIC, "", PT.LITERAL, "User:a", "*", Op.READ, Perm.ALLOW),
               AclBinding(RT.TOPIC, "t", PT.LITERAL, "User:a", "*", Op.ANY, Perm.ALLOW),
               allow("User:mallory", Op.DESCRIBE, RT.CLUSTER, "kafka-cluster")]
        r = await admin.request(CreateAclsRequest(creations=[creation(x) for x in bad]), 3)
        assert [x.error_code for x in r.results] == [InvalidRequestError.errno] * 5 + [0]
        assert r.results[0].error_message == \
            "The only valid name for the CLUSTER resource is kafka-cluster"
        r = await admin.request(describe_all(operation=0), 3)
        assert (r.error_code, r.error_message) == (InvalidRequestError.errno,
                                                   "Filter contain UNKNOWN elements")
        # DESCRIBE on the cluster is enough to describe, not to create.
        await until(lambda: len(b.authorizer.acls) == 1, "the ACL arrives")
        r = await stranger.request(describe_all(), 3)
        assert r.error_code == 0 and [x.resource_type for x in r.resources] == [4]
        r = await stranger.request(CreateAclsRequest(creations=[creation(ALICE_READ)]), 3)
        assert [x.error_code for x in r.results] == [ClusterAuthorizationFailedError.errno]


async def test_admin_client_round_trip():
    async with Cluster(brokers=2, authorizer_class_name=STANDARD,
                       super_users="User:ANONYMOUS") as c:
        admin = Admin(c.bootstrap)
        try:
            assert await admin.create_acls([ALICE_READ, PREFIX_WRITE]) == {
                ALICE_READ: None, PREFIX_WRITE: None}
            assert await admin.describe_acls() == sorted([ALICE_READ, PREFIX_WRITE])
            assert await admin.describe_acls(AclBindingFilter(pattern_type=PT.PREFIXED)) == [
                PREFIX_WRITE]
            f = AclBindingFilter(resource_type=RT.TOPIC, resource_name="t")
            assert await admin.delete_acls([f]) == {f: [ALICE_READ]}
            await until(lambda: all(list(b.authorizer.acls) == [PREFIX_WRITE]
                                    for b in c.brokers.values()), "deleted everywhere")
            assert await admin.describe_acls() == [PREFIX_WRITE]
            with pytest.raises(InvalidRequestError):
                await admin.create_acls([AclBinding(RT.TOPIC, "", PT.LITERAL, "User:a", "*",
                                                    Op.READ, Perm.ALLOW)])
        finally:
            await admin.close()
