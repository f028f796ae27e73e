"""DescribeGroups (key 15), v0-6.

v1: throttle_time_ms.  v3: include_authorized_operations: every group operation while there are
no ACLs (broker/acl_operations.py), else -2^31.  v4: group_instance_id.  v5: flexible.
An unknown group (or a KIP-848 consumer group) is described as state "Dead" with no error before
v6; v6 (KIP-1043) answers it GROUP_ID_NOT_FOUND with error_message "Group <id> not found.", as
Kafka 4.0 does. Member metadata and assignment are filled only in the Stable state.
"""
from __future__ import annotations

from kafka.errors import GroupIdNotFoundError
from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker import acl_operations
from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles

_Group = DescribeGroupsResponse.DescribedGroup
_Member = _Group.DescribedGroupMember


@handles(ApiKey.DescribeGroups, DescribeGroupsRequest, versions=(0, 6))
async def handle_describe_groups(ctx: RequestContext, req: DescribeGroupsRequest
        ) -> DescribeGroupsResponse:
    groups = []
    asked = ctx.api_version >= 3 and bool(req.include_authorized_operations)
    for gid in req.groups:
        code, state, ptype, pdata, members = ctx.groups.classic.describe_group(gid)
        message = None
        if ctx.api_version >= 6 and code == 0 and state == "Dead":
            code, message = GroupIdNotFoundError.errno, f"Group {gid} not found."
        groups.append(_Group(
            error_code=code, error_message=message, group_id=gid, group_state=state,
            protocol_type=ptype, protocol_data=pdata,
            authorized_operations=acl_operations.authorized(ctx, 3, gid, asked and code == 0),
            members=[_Member(member_id=mid, group_instance_id=iid, client_id=cid,
                             client_host=host, member_metadata=meta, member_assignment=asg)
                     for mid, iid, cid, host, meta, asg in members]))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)
