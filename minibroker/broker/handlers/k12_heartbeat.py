"""Heartbeat (key 12), v0-4.

v1: throttle_time_ms.  v3: group_instance_id (KIP-345).  v4: flexible.
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import HeartbeatRequest, HeartbeatResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles


@handles(ApiKey.Heartbeat, HeartbeatRequest, versions=(0, 4))
async def handle_heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    code = ctx.groups.classic.heartbeat(
        req.group_id, req.member_id, req.group_instance_id if ctx.api_version >= 3 else None,
        req.generation_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)
