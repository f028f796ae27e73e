"""ListGroups (key 16), v0-5.

v1: throttle_time_ms.  v3: flexible.  v4: states_filter (case-insensitive) and group_state.
v5: types_filter and group_type ("classic", or "consumer" for KIP-848 groups).
Lists the groups of the __consumer_offsets partitions this broker leads; while one of them is
loading the error is COORDINATOR_LOAD_IN_PROGRESS (with the groups known so far).
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.security.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as RT

_Group = ListGroupsResponse.ListedGroup


@handles(ApiKey.ListGroups, ListGroupsRequest, versions=(0, 5))
async def handle_list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    v = ctx.api_version
    code, groups = ctx.groups.classic.list_groups(
        req.states_filter if v >= 4 else None, req.types_filter if v >= 5 else None)
    listed = [(gid, ptype, state, "classic") for gid, ptype, state in groups]
    listed += ctx.groups.consumer.list_groups(
        req.states_filter if v >= 4 else None, req.types_filter if v >= 5 else None)
    if ctx.authorizer is not None and \
            not ctx.authorize(Op.DESCRIBE, RT.CLUSTER, CLUSTER_NAME):
        # KIP-11: without DESCRIBE on the cluster, only the groups it may DESCRIBE
        listed = [g for g in listed if ctx.authorize(Op.DESCRIBE, RT.GROUP, g[0])]
    return ListGroupsResponse(
        throttle_time_ms=0, error_code=code,
        groups=[_Group(group_id=gid, protocol_type=ptype, group_state=state, group_type=gtype)
                for gid, ptype, state, gtype in sorted(listed)])
