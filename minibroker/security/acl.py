"""ACL vocabulary as Kafka's (KIP-11, KIP-290): resource, pattern, operation and permission
types with their wire codes, an ACL binding, and the filters DescribeAcls / DeleteAcls take.

Codes are Kafka's (org.apache.kafka.common.resource.ResourceType, PatternType,
org.apache.kafka.common.acl.AclOperation, AclPermissionType); names print as Kafka prints them.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

WILDCARD = "*"                      # ResourcePattern.WILDCARD_RESOURCE, and AccessControlEntry's any host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"      # the CLUSTER resource's only name


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def enum_value(cls, code: int):
    """cls(code), or cls.UNKNOWN for a code Kafka does not define (as fromCode does)."""
    try:
        return cls(code)
    except ValueError:
        return cls.UNKNOWN


# An ALLOW for one of these also allows DESCRIBE (resp. DESCRIBE_CONFIGS); never a DENY.
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                              AclOperation.DELETE, AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})

# Kafka's AclEntry.supportedOperations: what `authorized_operations` (KIP-430) ranges over.
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.ALTER,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry (Kafka's AclBinding)."""
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str              # "User:alice", or "User:*" for every principal
    host: str                   # "*" or one address
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        # Built from wire codes or a snapshot's ints: keep Kafka's names printable.
        for name, cls in (("resource_type", ResourceType), ("pattern_type", PatternType),
                          ("operation", AclOperation), ("permission_type", AclPermissionType)):
            v = getattr(self, name)
            if type(v) is not cls:
                object.__setattr__(self, name, enum_value(cls, v))

    def pattern_str(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, "
                f"name={self.resource_name}, patternType={self.pattern_type.name})")

    def entry_str(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission_type.name})")

    def invalid(self) -> str | None:
        """Why the controller refuses to create it (Kafka's AclControlManager.validateNewAcl and
        the broker's checks), or None."""
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            return f"Invalid operation {self.operation.name}"
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return f"Invalid permission type {self.permission_type.name}"
        if self.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
            return f"Invalid resource type {self.resource_type.name}"
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid pattern type {self.pattern_type.name}"
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        if not self.resource_name:
            return "Invalid empty resource name"
        kind, sep, name = self.principal.partition(":")
        if not sep:
            return (f"Could not parse principal from `{self.principal}` (no colon is present "
                    "separating the principal type from the principal name)")
        if not self.host:
            return "Invalid empty host"
        return None


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls / DeleteAcls: None (name, principal, host) and ANY match everything."""
    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def invalid(self) -> str | None:
        """Kafka refuses filters with UNKNOWN elements (INVALID_REQUEST)."""
        for v in (self.resource_type, self.pattern_type, self.operation, self.permission_type):
            if v.name == "UNKNOWN":
                return "Filter contain UNKNOWN elements"
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self.pattern_matches(acl) and self.entry_matches(acl)

    def pattern_matches(self, acl: AclBinding) -> bool:
        """Kafka's ResourcePatternFilter.matches (MATCH: the patterns that apply to the name)."""
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != acl.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if pt in (PatternType.ANY, acl.pattern_type) and self.resource_name == acl.resource_name:
            return True
        if pt != PatternType.MATCH:
            return False
        if acl.pattern_type == PatternType.LITERAL:
            return acl.resource_name in (self.resource_name, WILDCARD)
        return (acl.pattern_type == PatternType.PREFIXED
                and self.resource_name.startswith(acl.resource_name))

    def entry_matches(self, acl: AclBinding) -> bool:
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and self.operation in (AclOperation.ANY, acl.operation)
                and self.permission_type in (AclPermissionType.ANY, acl.permission_type))


def binding_of(r) -> AclBinding:
    """An AccessControlEntryRecord (or UpdateMetadata's AclEntry, CreateAcls' creation) as an
    AclBinding."""
    return AclBinding(r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host,
                      r.operation, r.permission_type)


def filter_of(resource_type: int, name: str | None, pattern_type: int, principal: str | None,
              host: str | None, operation: int, permission_type: int) -> AclBindingFilter:
    """A DescribeAcls / DeleteAcls filter from its wire fields (unknown codes become UNKNOWN)."""
    return AclBindingFilter(enum_value(ResourceType, resource_type), name,
                            enum_value(PatternType, pattern_type), principal, host,
                            enum_value(AclOperation, operation),
                            enum_value(AclPermissionType, permission_type))
