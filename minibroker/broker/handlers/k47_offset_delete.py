"""OffsetDelete (key 47), v0 (KIP-496).

Deletes committed offsets of an Empty group, or of topics a consumer group does not subscribe to
(GROUP_SUBSCRIBED_TO_TOPIC otherwise; a non-consumer group that is not Empty: NON_EMPTY_GROUP).
Unknown group: GROUP_ID_NOT_FOUND. Unknown topic-partition: UNKNOWN_TOPIC_OR_PARTITION.
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import partition_codes

_Topic = OffsetDeleteResponse.OffsetDeleteResponseTopic
_Part = _Topic.OffsetDeleteResponsePartition


@handles(ApiKey.OffsetDelete, OffsetDeleteRequest, versions=(0, 0))
async def handle_offset_delete(ctx: RequestContext, req: OffsetDeleteRequest
        ) -> OffsetDeleteResponse:
    wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    code, results = await ctx.groups.offsets.delete_offsets(req.group_id, wanted)
    topics = [] if code else partition_codes(req.topics, _Topic, _Part, results)
    return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=topics)
