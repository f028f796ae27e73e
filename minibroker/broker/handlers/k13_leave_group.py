"""LeaveGroup (key 13), v0-5.

v1: throttle_time_ms.  v3: batch leave of members (member_id and/or group_instance_id, KIP-345),
per-member errors.  v4: flexible.  v5: reason.  Before v3 the one member's error is the
top-level error (Kafka's LeaveGroupResponse does the same).
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import LeaveGroupRequest, LeaveGroupResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles

_Member = LeaveGroupResponse.MemberResponse


@handles(ApiKey.LeaveGroup, LeaveGroupRequest, versions=(0, 5))
async def handle_leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    v = ctx.api_version
    if v >= 3:
        members = [(m.member_id, m.group_instance_id, m.reason if v >= 5 else None)
                   for m in req.members]
    else:
        members = [(req.member_id, None, None)]
    code, codes = ctx.groups.classic.leave_group(req.group_id, members)
    if v < 3:
        if code == 0 and codes:
            code = codes[0]
        return LeaveGroupResponse(throttle_time_ms=0, error_code=code, members=[])
    return LeaveGroupResponse(
        throttle_time_ms=0, error_code=code,
        members=[_Member(member_id=mid, group_instance_id=iid, error_code=c)
                 for (mid, iid, _), c in zip(members, codes)] if not code else [])
