"""`authorized_operations` (KIP-430) while minibroker has no ACLs: every operation Kafka supports
on the resource type is allowed, as Kafka's authorizer answers with `allow.everyone.if.no.acl.found`.

On the wire a bit set, bit n for AclOperation code n (READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7,
DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12), over
the operations Kafka's AclEntry.supportedOperations lists for the type; kafka-python's messages
take the set of codes (its BitField), and None for Kafka's "not asked" value, -2^31.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from minibroker.security.acl import ResourceType

if TYPE_CHECKING:
    from minibroker.broker.context import RequestContext

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
OMITTED = None

TOPIC_OPERATIONS = frozenset({READ, WRITE, CREATE, DESCRIBE, DELETE, ALTER, DESCRIBE_CONFIGS,
                              ALTER_CONFIGS})
GROUP_OPERATIONS = frozenset({READ, DESCRIBE, DELETE})
CLUSTER_OPERATIONS = frozenset({CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                                IDEMPOTENT_WRITE, ALTER, DESCRIBE})


def topic_operations(asked: bool) -> frozenset[int] | None:
    return TOPIC_OPERATIONS if asked else OMITTED


def group_operations(asked: bool) -> frozenset[int] | None:
    return GROUP_OPERATIONS if asked else OMITTED


def cluster_operations(asked: bool) -> frozenset[int] | None:
    return CLUSTER_OPERATIONS if asked else OMITTED


def bits(operations: frozenset[int] | None) -> int:
    """The int32 Kafka sends."""
    if operations is None:
        return -(2**31)
    return sum(1 << op for op in operations)


def authorized(ctx: RequestContext, resource_type: int, name: str, asked: bool
               ) -> frozenset[int] | None:
    """KIP-430 for the request's principal: OMITTED when not asked; every supported operation
    without an authorizer; else those its ACLs allow."""
    if not asked:
        return OMITTED
    authz = ctx.authorizer
    if authz is None:
        return _ALL[resource_type]
    return authz.authorized_operations(ctx.principal, ctx.client_host,
                                       ResourceType(resource_type), name)


_ALL = {2: TOPIC_OPERATIONS, 3: GROUP_OPERATIONS, 4: CLUSTER_OPERATIONS}
