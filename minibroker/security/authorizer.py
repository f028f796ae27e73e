"""The authorizer: Kafka's StandardAuthorizer semantics (KIP-11) over the ACLs a broker learned.

- super.users (`User:a;User:b`) may do anything, and so may the in-process inter-broker
  principal (security.principal.INTER_BROKER).
- The ACLs that apply to a resource: LITERAL with its exact name, LITERAL `*`, and PREFIXED whose
  name starts the resource's. Of those, an entry matches when its principal is the caller's or
  `User:*`, its host is `*` or the caller's address, and its operation is ALL or the one asked;
  an ALLOW of READ, WRITE, DELETE or ALTER also allows DESCRIBE, and of ALTER_CONFIGS also
  DESCRIBE_CONFIGS (a DENY implies nothing).
- A matching DENY wins over any ALLOW. No match: denied, unless no ACL at all applies to the
  resource and `allow.everyone.if.no.acl.found` is true.

Decisions are cached until the ACLs change (produce and fetch ask once per partition).
"""
from __future__ import annotations

from typing import Iterable

from minibroker.security.acl import (IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS,
                                     SUPPORTED_OPERATIONS, WILDCARD, WILDCARD_PRINCIPAL,
                                     AclBinding, AclBindingFilter, AclOperation,
                                     AclPermissionType, PatternType, ResourceType)
from minibroker.security.principal import INTER_BROKER, KafkaPrincipal

# authorizer.class.name values that turn the authorizer on (Kafka's two built-in ones).
AUTHORIZER_CLASS_NAMES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                          "kafka.security.authorizer.AclAuthorizer")
_CACHE_MAX = 65536
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def parse_super_users(value: str) -> frozenset[str]:
    """super.users: principals separated by semicolons."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


def _entry_result(acl: AclBinding, op: AclOperation, principals: tuple[str, str],
                  host: str) -> AclPermissionType | None:
    """Kafka's StandardAuthorizerData.findResult: this ACL's verdict, None if it does not match."""
    if acl.principal not in principals:
        return None
    if acl.host != WILDCARD and acl.host != host:
        return None
    if acl.operation != AclOperation.ALL:
        if acl.permission_type == ALLOW:
            if op == AclOperation.DESCRIBE:
                if acl.operation not in IMPLIES_DESCRIBE:
                    return None
            elif op == AclOperation.DESCRIBE_CONFIGS:
                if acl.operation not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif op != acl.operation:
                return None
        elif op != acl.operation:
            return None
    return acl.permission_type


class _TypeIndex:
    """The ACLs of one resource type: LITERAL by name, PREFIXED by prefix (and its lengths)."""
    __slots__ = ("literal", "prefixed", "prefix_lengths")

    def __init__(self) -> None:
        self.literal: dict[str, list[AclBinding]] = {}
        self.prefixed: dict[str, list[AclBinding]] = {}
        self.prefix_lengths: list[int] = []

    def applying_to(self, name: str) -> list[AclBinding]:
        out = list(self.literal.get(name, ()))
        if name != WILDCARD:
            out += self.literal.get(WILDCARD, ())
        for n in self.prefix_lengths:
            if n > len(name):
                break
            out += self.prefixed.get(name[:n], ())
        return out


class StandardAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
                 ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._acls: tuple[AclBinding, ...] = ()
        self._index: dict[ResourceType, _TypeIndex] = {}
        self._cache: dict[tuple, bool] = {}

    # ------------------------------------------------------------------ ACLs
    @property
    def acls(self) -> tuple[AclBinding, ...]:
        return self._acls

    def set_acls(self, acls: Iterable[AclBinding]) -> None:
        """Replace every ACL (what the controller's last UpdateMetadata carried)."""
        self._acls = tuple(sorted(set(acls)))
        index: dict[ResourceType, _TypeIndex] = {}
        for acl in self._acls:
            ix = index.setdefault(acl.resource_type, _TypeIndex())
            table = ix.prefixed if acl.pattern_type == PatternType.PREFIXED else ix.literal
            table.setdefault(acl.resource_name, []).append(acl)
        for ix in index.values():
            ix.prefix_lengths = sorted({len(n) for n in ix.prefixed})
        self._index = index
        self._cache = {}

    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        return [a for a in self._acls if f.matches(a)]

    # ------------------------------------------------------------------ decisions
    def authorize(self, principal: KafkaPrincipal, host: str, op: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        key = (principal, host, op, resource_type, name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        result = self._decide(principal, host, op, resource_type, name)
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[key] = result
        return result

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def _decide(self, principal: KafkaPrincipal, host: str, op: AclOperation,
                resource_type: ResourceType, name: str) -> bool:
        me = str(principal)
        if me in self.super_users or principal == INTER_BROKER:
            return True
        if not isinstance(name, str):
            return False                    # a malformed request's null name matches nothing
        ix = self._index.get(resource_type)
        applying = ix.applying_to(name) if ix is not None else []
        if not applying:
            return self.allow_everyone_if_no_acl_found
        principals = (me, WILDCARD_PRINCIPAL)
        allowed = False
        for acl in applying:
            verdict = _entry_result(acl, op, principals, host)
            if verdict == DENY:
                return False
            if verdict == ALLOW:
                allowed = True
        return allowed

    def authorize_by_resource_type(self, principal: KafkaPrincipal, host: str, op: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """Whether `op` is allowed on some resource of the type (Kafka's
        Authorizer.authorizeByResourceType, KIP-679): an ALLOW pattern not covered by a DENY."""
        if self.authorize(principal, host, op, resource_type, "hardcode"):
            return True
        me = str(principal)
        deny_literal, deny_prefixed, allow_literal, allow_prefixed = set(), set(), set(), set()
        for acl in self._acls:
            if acl.resource_type != resource_type or acl.host not in (WILDCARD, host):
                continue
            if acl.principal not in (me, WILDCARD_PRINCIPAL):
                continue
            if acl.operation not in (op, AclOperation.ALL):
                continue
            literal = acl.pattern_type == PatternType.LITERAL
            if acl.permission_type == DENY:
                if literal and acl.resource_name == WILDCARD:
                    return False
                (deny_literal if literal else deny_prefixed).add(acl.resource_name)
            elif literal and acl.resource_name == WILDCARD:
                return True
            else:
                (allow_literal if literal else allow_prefixed).add(acl.resource_name)
        for name, literal in sorted([(n, True) for n in allow_literal]
                                    + [(n, False) for n in allow_prefixed]):
            if literal and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False

    def authorized_operations(self, principal: KafkaPrincipal, host: str,
                              resource_type: ResourceType, name: str) -> frozenset[int]:
        """The codes of the supported operations allowed on the resource (KIP-430)."""
        return frozenset(int(op) for op in SUPPORTED_OPERATIONS[resource_type]
                         if self.authorize(principal, host, op, resource_type, name))


def authorizer_from_config(class_name: str, super_users: str,
                           allow_everyone_if_no_acl_found: bool) -> StandardAuthorizer | None:
    """The broker's authorizer for its configs; None (everything allowed) when
    authorizer.class.name is empty, as Kafka's default."""
    if not class_name:
        return None
    return StandardAuthorizer(parse_super_users(super_users), allow_everyone_if_no_acl_found)
