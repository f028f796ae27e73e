"""CreateAcls and DeleteAcls as controller operations (Kafka's AclControlManager).

An ACL is an AccessControlEntryRecord with an id; deleting one is a RemoveAccessControlEntryRecord.
Creating an ACL that exists already writes nothing and succeeds; an invalid one answers
INVALID_REQUEST with Kafka's message, the others in the request are created all the same.
"""
from __future__ import annotations

import uuid
from typing import Any

from kafka.errors import InvalidRequestError

from minibroker.controller.image import MetadataImage
from minibroker.controller.result import Result
from minibroker.ids import IdSource
from minibroker.controller.records import acl_entry, remove_acl_entry
from minibroker.security.acl import AclBinding, AclBindingFilter

# (error code, message) per creation; per filter (code, message, [(binding, code, message)])
Creation = tuple[int, str | None]
Deletion = tuple[int, str | None, list[tuple[AclBinding, int, str | None]]]


def create_acls(image: MetadataImage, bindings: list[AclBinding],
                ids: IdSource) -> Result[list[Creation]]:
    existing = set(image.acls.values())
    records: list[Any] = []
    response: list[Creation] = []
    for b in bindings:
        problem = b.invalid()
        if problem:
            response.append((InvalidRequestError.errno, problem))
            continue
        if b not in existing:
            existing.add(b)
            records.append(acl_entry(ids.uuid(), b))
        response.append((0, None))
    return Result(tuple(records), response)


def delete_acls(image: MetadataImage, filters: list[AclBindingFilter]) -> Result[list[Deletion]]:
    """Each filter's matching ACLs are removed (an ACL matched by two filters, once)."""
    removed: set[uuid.UUID] = set()
    records: list[Any] = []
    response: list[Deletion] = []
    ordered = sorted(image.acls.items(), key=lambda kv: kv[1])
    for f in filters:
        problem = f.invalid()
        if problem:
            response.append((InvalidRequestError.errno, problem, []))
            continue
        matched: list[tuple[AclBinding, int, str | None]] = []
        for acl_id, b in ordered:
            if f.matches(b):
                matched.append((b, 0, None))
                if acl_id not in removed:
                    removed.add(acl_id)
                    records.append(remove_acl_entry(acl_id))
        response.append((0, None, matched))
    return Result(tuple(records), response)
