"""CreateAcls (key 30), v1-3 (Kafka 4 removed v0).

v1: resource pattern type (KIP-290).  v2: flexible.  v3: USER resources.
ALTER on the CLUSTER is needed (every result CLUSTER_AUTHORIZATION_FAILED); no authorizer:
SECURITY_DISABLED ("No Authorizer is configured."). Forwarded to the controller, which writes an
AccessControlEntryRecord per new ACL (an existing one succeeds without a record); an invalid
creation (UNKNOWN/ANY types, a CLUSTER name other than kafka-cluster, an empty name, a principal
without a type) answers INVALID_REQUEST with Kafka's message, the others are created.
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.admin import CreateAclsRequest, CreateAclsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import acl_api
from minibroker.security.acl import AclBinding, AclOperation

_Result = CreateAclsResponse.AclCreationResult


@handles(ApiKey.CreateAcls, CreateAclsRequest, versions=(1, 3))
@acl_api(AclOperation.ALTER, "No Authorizer is configured.")
async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    bindings = [AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type,
                           c.principal, c.host, c.operation, c.permission_type)
                for c in req.creations]
    results = await ctx.controller.create_acls(bindings) if bindings else []
    return CreateAclsResponse(throttle_time_ms=0, results=[
        _Result(error_code=code, error_message=message) for code, message in results])
