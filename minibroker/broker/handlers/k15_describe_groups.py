"""DescribeGroups (key 15), v0-5.

v1: throttle_time_ms.  v3: include_authorized_operations (we report none: -2^31).
v4: group_instance_id.  v5: flexible.
An unknown group is described as state "Dead" with no error (Kafka does the same). Member
metadata and assignment are filled only in the Stable state.
Not implemented: authorized operations (no ACLs); v6 error_message.
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.dispatch import RequestContext, handles

_Group = DescribeGroupsResponse.DescribedGroup
_Member = _Group.DescribedGroupMember


@handles(ApiKey.DescribeGroups, DescribeGroupsRequest, versions=(0, 5))
async def handle_describe_groups(ctx: RequestContext, req: DescribeGroupsRequest):
    groups = []
    for gid in req.groups:
        code, state, ptype, pdata, members = ctx.broker.groups.classic.describe_group(gid)
        groups.append(_Group(
            error_code=code, group_id=gid, group_state=state, protocol_type=ptype,
            protocol_data=pdata, authorized_operations=None,
            members=[_Member(member_id=mid, group_instance_id=iid, client_id=cid,
                             client_host=host, member_metadata=meta, member_assignment=asg)
                     for mid, iid, cid, host, meta, asg in members]))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)
