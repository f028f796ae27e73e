"""DeleteRecords (key 21), v0-2.

Sent to partition leaders. Each partition's log start offset moves up to `offset` (-1: the high
watermark); an offset past the high watermark (or negative other than -1) is OFFSET_OUT_OF_RANGE,
a topic whose cleanup.policy lacks "delete" is POLICY_VIOLATION, and low_watermark is the leader's
new log start offset. Followers follow through the log_start_offset of their fetch responses.
v2: flexible.
Not implemented: waiting (timeout_ms) until every replica's log start offset has moved — we answer
once the leader's has.
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import per_partition

_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Part = _Topic.DeleteRecordsPartitionResult


@handles(ApiKey.DeleteRecords, DeleteRecordsRequest, versions=(0, 2))
async def handle_delete_records(ctx: RequestContext, req: DeleteRecordsRequest
        ) -> DeleteRecordsResponse:
    def delete(t: Any, p: Any) -> Any:
        low_watermark, err = ctx.replica_manager.delete_records(t.name, p.partition_index, p.offset)
        return _Part(partition_index=p.partition_index, low_watermark=low_watermark, error_code=err)
    return DeleteRecordsResponse(throttle_time_ms=0,
                                 topics=per_partition(req.topics, _Topic, delete))
