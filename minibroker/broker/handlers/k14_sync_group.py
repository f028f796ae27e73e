"""SyncGroup (key 14), v0-5.

v1: throttle_time_ms.  v3: group_instance_id (KIP-345).  v4: flexible.  v5: protocol_type and
protocol_name, checked against the group's (INCONSISTENT_GROUP_PROTOCOL) and echoed.
Followers wait for the leader's assignment; the leader's SyncGroup stores the group in
__consumer_offsets and everyone is answered once that write reached the high watermark.
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import SyncGroupRequest, SyncGroupResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles


@handles(ApiKey.SyncGroup, SyncGroupRequest, versions=(0, 5))
async def handle_sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    v = ctx.api_version
    waiter = ctx.groups.classic.sync_group(
        req.group_id, req.generation_id, req.member_id,
        req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None,
        [(a.member_id, bytes(a.assignment)) for a in req.assignments])
    r = await waiter
    return SyncGroupResponse(throttle_time_ms=0, error_code=r.error_code,
                             protocol_type=r.protocol_type, protocol_name=r.protocol_name,
                             assignment=r.assignment)
