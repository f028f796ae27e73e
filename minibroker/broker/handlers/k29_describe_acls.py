"""DescribeAcls (key 29), v1-3 (Kafka 4 removed v0).

v1: pattern type filter (KIP-290).  v2: flexible.  v3: USER resources.
Answered from this broker's authorizer (the ACLs the controller's UpdateMetadata carried), as
Kafka's brokers answer from theirs. DESCRIBE on the CLUSTER is needed
(CLUSTER_AUTHORIZATION_FAILED); no authorizer: SECURITY_DISABLED; a filter with an UNKNOWN
element: INVALID_REQUEST. Resources are listed sorted by (type, name, pattern type).
Not implemented: —
"""
from __future__ import annotations

from typing import Any

from kafka.errors import InvalidRequestError
from kafka.protocol.admin import DescribeAclsRequest, DescribeAclsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.error_response import error_response
from minibroker.broker.handler_helper import acl_api
from minibroker.security.acl import (AclBindingFilter, AclOperation, PatternType, ResourceType,
                                     filter_of)

_Resource = DescribeAclsResponse.DescribeAclsResource
_Acl = _Resource.AclDescription


@handles(ApiKey.DescribeAcls, DescribeAclsRequest, versions=(1, 3))
@acl_api(AclOperation.DESCRIBE, "No Authorizer is configured on the broker")
async def handle_describe_acls(ctx: RequestContext, req: DescribeAclsRequest
                               ) -> DescribeAclsResponse:
    f: AclBindingFilter = filter_of(req.resource_type_filter, req.resource_name_filter,
                                    req.pattern_type_filter, req.principal_filter,
                                    req.host_filter, req.operation, req.permission_type)
    problem = f.invalid()
    if problem:
        return error_response(req, ctx.api_version, InvalidRequestError.errno, problem)
    authorizer = ctx.authorizer
    assert authorizer is not None       # acl_api answered SECURITY_DISABLED without one
    grouped: dict[tuple[ResourceType, str, PatternType], list[Any]] = {}
    for a in authorizer.describe(f):
        grouped.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(
            _Acl(principal=a.principal, host=a.host, operation=int(a.operation),
                 permission_type=int(a.permission_type)))
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=0, error_message=None,
        resources=[_Resource(resource_type=int(rt), resource_name=name, pattern_type=int(pt),
                             acls=acls) for (rt, name, pt), acls in sorted(grouped.items())])
