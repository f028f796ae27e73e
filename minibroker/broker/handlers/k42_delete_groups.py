"""DeleteGroups (key 42), v0-2.

v2: flexible. Only Empty groups can be deleted (NON_EMPTY_GROUP otherwise); unknown or Dead:
GROUP_ID_NOT_FOUND; empty id: INVALID_GROUP_ID. Deleting writes tombstones for the group and each
of its offsets, and answers once they reached the high watermark.
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.dispatch import RequestContext, handles

_Result = DeleteGroupsResponse.DeletableGroupResult


@handles(ApiKey.DeleteGroups, DeleteGroupsRequest, versions=(0, 2))
async def handle_delete_groups(ctx: RequestContext, req: DeleteGroupsRequest):
    results = await ctx.broker.groups.classic.delete_groups(list(req.groups_names))
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        _Result(group_id=gid, error_code=code) for gid, code in results])
