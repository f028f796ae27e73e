"""DeleteAcls (key 31), v1-3 (Kafka 4 removed v0).

v1: pattern type filter (KIP-290).  v2: flexible.  v3: USER resources.
ALTER on the CLUSTER is needed (every filter CLUSTER_AUTHORIZATION_FAILED); no authorizer:
SECURITY_DISABLED. Forwarded to the controller: each filter's matching ACLs are removed
(RemoveAccessControlEntryRecord) and listed in its result; a filter with an UNKNOWN element
answers INVALID_REQUEST.
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.admin import DeleteAclsRequest, DeleteAclsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import acl_api
from minibroker.security.acl import AclOperation, filter_of

_Filter = DeleteAclsResponse.DeleteAclsFilterResult
_Match = _Filter.DeleteAclsMatchingAcl


@handles(ApiKey.DeleteAcls, DeleteAclsRequest, versions=(1, 3))
@acl_api(AclOperation.ALTER, "No Authorizer is configured.")
async def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    filters = [filter_of(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                         f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in req.filters]
    results = await ctx.controller.delete_acls(filters) if filters else []
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
        _Filter(error_code=code, error_message=message, matching_acls=[
            _Match(error_code=c, error_message=m, resource_type=int(a.resource_type),
                   resource_name=a.resource_name, pattern_type=int(a.pattern_type),
                   principal=a.principal, host=a.host, operation=int(a.operation),
                   permission_type=int(a.permission_type)) for a, c, m in matched])
        for code, message, matched in results])
