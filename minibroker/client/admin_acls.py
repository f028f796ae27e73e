"""The Admin client's ACL calls (KIP-11): CreateAcls, DescribeAcls, DeleteAcls.

    await admin.create_acls([AclBinding(ResourceType.TOPIC, "t", PatternType.LITERAL,
                                        "User:alice", "*", AclOperation.READ,
                                        AclPermissionType.ALLOW)])
    await admin.describe_acls(AclBindingFilter(resource_type=ResourceType.TOPIC))
    await admin.delete_acls([AclBindingFilter(principal="User:alice")])
"""
from __future__ import annotations

from typing import Iterable

import kafka.errors as Errors
from kafka.protocol.admin import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest

from minibroker.security.acl import AclBinding, AclBindingFilter, binding_of

_Creation = CreateAclsRequest.AclCreation
_Filter = DeleteAclsRequest.DeleteAclsFilter


def _error(code: int, what: str, message: str | None) -> Exception:
    return Errors.for_code(code)(f"{what}: {message}" if message else what)


class AclAdmin:
    """Mixed into minibroker.client.admin.Admin (uses its `_to_controller`)."""

    async def create_acls(self, bindings: Iterable[AclBinding], raise_on_error: bool = True
                          ) -> dict[AclBinding, Exception | None]:
        bindings = list(bindings)
        resp = await self._to_controller(CreateAclsRequest(creations=[_Creation(
            resource_type=int(b.resource_type), resource_name=b.resource_name,
            resource_pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
            operation=int(b.operation), permission_type=int(b.permission_type))
            for b in bindings]), lo=1, hi=3)
        out = {b: _error(r.error_code, f"create acl {b.entry_str()} on {b.pattern_str()}",
                         r.error_message) if r.error_code else None
               for b, r in zip(bindings, resp.results)}
        if raise_on_error:
            for exc in out.values():
                if exc is not None:
                    raise exc
        return out

    async def describe_acls(self, f: AclBindingFilter = AclBindingFilter()) -> list[AclBinding]:
        resp = await self._to_controller(DescribeAclsRequest(
            resource_type_filter=int(f.resource_type), resource_name_filter=f.resource_name,
            pattern_type_filter=int(f.pattern_type), principal_filter=f.principal,
            host_filter=f.host, operation=int(f.operation),
            permission_type=int(f.permission_type)), lo=1, hi=3)
        if resp.error_code:
            raise _error(resp.error_code, "describe acls", resp.error_message)
        return sorted(AclBinding(r.resource_type, r.resource_name, r.pattern_type, a.principal,
                                 a.host, a.operation, a.permission_type)
                      for r in resp.resources for a in r.acls)

    async def delete_acls(self, filters: Iterable[AclBindingFilter], raise_on_error: bool = True
                          ) -> dict[AclBindingFilter, list[AclBinding] | Exception]:
        """Each filter's deleted ACLs (or its error)."""
        filters = list(filters)
        resp = await self._to_controller(DeleteAclsRequest(filters=[_Filter(
            resource_type_filter=int(f.resource_type), resource_name_filter=f.resource_name,
            pattern_type_filter=int(f.pattern_type), principal_filter=f.principal,
            host_filter=f.host, operation=int(f.operation),
            permission_type=int(f.permission_type)) for f in filters]), lo=1, hi=3)
        out: dict = {}
        for f, r in zip(filters, resp.filter_results):
            if r.error_code:
                out[f] = _error(r.error_code, "delete acls", r.error_message)
                if raise_on_error:
                    raise out[f]
            else:
                out[f] = [binding_of(m) for m in r.matching_acls]
        return out
