"""DescribeProducers (key 61), v0: the active producers of partitions this broker leads (Kafka's
kafka-transactions.sh describe-producers): id, epoch, last sequence and timestamp, and the first
offset of the open transaction (-1: none)."""
from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import per_partition

_Topic = DescribeProducersResponse.TopicResponse
_Part = _Topic.PartitionResponse
_State = _Part.ProducerState


@handles(ApiKey.DescribeProducers, DescribeProducersRequest, versions=(0, 0))
async def handle_describe_producers(ctx: RequestContext, req: DescribeProducersRequest
        ) -> DescribeProducersResponse:
    def describe(t: Any, index: int) -> Any:
        err, producers = ctx.replica_manager.describe_producers(t.name, index)
        return _Part(partition_index=index, error_code=err, error_message=None, active_producers=[
            _State(producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                   last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                   coordinator_epoch=-1, current_txn_start_offset=e.current_txn_first_offset)
            for e in producers])
    return DescribeProducersResponse(throttle_time_ms=0, topics=per_partition(
        req.topics, _Topic, describe, asked="partition_indexes"))
