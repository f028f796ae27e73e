"""Helpers for ACL tests: a connection to a broker as a given principal (set on the server end,
as a SASL or TLS handshake would), and ACL shorthands."""
from __future__ import annotations

from minibroker.network import memory
from minibroker.network.client import KafkaClientConnection
from minibroker.security.acl import (AclBinding, AclOperation, AclPermissionType, PatternType,
                                     ResourceType)
from minibroker.security.principal import KafkaPrincipal

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def connect_as(broker, principal: str | KafkaPrincipal) -> KafkaClientConnection:
    """An in-memory client connection to `broker`'s client listener whose server end carries
    `principal`."""
    conns: dict = {}
    client = memory.connect(broker.handle, connections=conns)
    [server] = list(conns)
    broker.connections[server] = None
    server.principal = principal if isinstance(principal, KafkaPrincipal) \
        else KafkaPrincipal.parse(principal)
    return client


def allow(principal: str, op: AclOperation, rt: ResourceType, name: str,
          pattern: PatternType = PatternType.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, AclPermissionType.ALLOW)


def deny(principal: str, op: AclOperation, rt: ResourceType, name: str,
         pattern: PatternType = PatternType.LITERAL, host: str = "*") -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, AclPermissionType.DENY)
