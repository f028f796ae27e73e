"""JoinGroup (key 11), v0-9.

v1: rebalance_timeout_ms.  v2: throttle_time_ms.  v4: a join without member id gets
MEMBER_ID_REQUIRED and a member id to rejoin with (KIP-394).  v5: group_instance_id (KIP-345).
v6: flexible.  v7: protocol_type in the response.  v8: reason.  v9: skip_assignment (KIP-814).
The rebalance barrier is the one suspension point: the coordinator answers when the rebalance
completes. Protocol metadata over max.message.bytes of __consumer_offsets: INVALID_REQUEST.
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import JoinGroupRequest, JoinGroupResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles

_Member = JoinGroupResponse.JoinGroupResponseMember


def client_host(ctx: RequestContext) -> str:
    peer = getattr(ctx.conn, "peer", None)
    return f"/{peer[0]}" if peer else ""


@handles(ApiKey.JoinGroup, JoinGroupRequest, versions=(0, 9))
async def handle_join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.api_version
    waiter = ctx.groups.classic.join_group(
        req.group_id, req.member_id, req.group_instance_id if v >= 5 else None,
        require_known_member_id=v >= 4, client_id=ctx.header.client_id or "",
        client_host=client_host(ctx),
        rebalance_timeout_ms=req.rebalance_timeout_ms if v >= 1 else -1,
        session_timeout_ms=req.session_timeout_ms, protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        reason=req.reason if v >= 8 else None, supports_skip_assignment=v >= 9)
    r = await waiter
    protocol_name = r.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=r.error_code, generation_id=r.generation_id,
        protocol_type=r.protocol_type, protocol_name=protocol_name, leader=r.leader,
        skip_assignment=r.skip_assignment, member_id=r.member_id,
        members=[_Member(member_id=mid, group_instance_id=iid, metadata=meta)
                 for mid, iid, meta in r.members])
