"""DeleteGroups (key 42), v0-2.

v2: flexible. Classic and KIP-848 consumer groups alike: only Empty groups can be deleted
(NON_EMPTY_GROUP otherwise: a consumer group with any member); unknown or Dead:
GROUP_ID_NOT_FOUND; empty id: INVALID_GROUP_ID; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS as
any group request. Deleting writes tombstones for each of the group's offsets, then for its group
records (a consumer group's: target assignment epoch, partition metadata, group epoch, and any
member records), and answers once they reached the high watermark; a coordinator that replays
__consumer_offsets after a failover does not bring the group back.
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles

_Result = DeleteGroupsResponse.DeletableGroupResult


@handles(ApiKey.DeleteGroups, DeleteGroupsRequest, versions=(0, 2))
async def handle_delete_groups(ctx: RequestContext, req: DeleteGroupsRequest
        ) -> DeleteGroupsResponse:
    results = await ctx.groups.classic.delete_groups(list(req.groups_names))
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        _Result(group_id=gid, error_code=code) for gid, code in results])
