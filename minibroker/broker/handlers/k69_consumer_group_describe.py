"""ConsumerGroupDescribe (key 69), v0-1.

v1: MemberType (KIP-1099; always 1, consumer: no classic members inside consumer groups here).
A group that is not a consumer group, or unknown: GROUP_ID_NOT_FOUND with a message, as Kafka.
Not implemented: authorized operations (no ACLs: -2^31).
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.protocol.messages import (ConsumerGroupDescribeRequest,
                                          ConsumerGroupDescribeResponse)


@handles(ApiKey.ConsumerGroupDescribe, ConsumerGroupDescribeRequest, versions=(0, 1))
async def handle_consumer_group_describe(ctx: RequestContext, req: ConsumerGroupDescribeRequest
                                         ) -> ConsumerGroupDescribeResponse:
    groups = ctx.groups.consumer.describe(list(req.group_ids))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
