"""ConsumerGroupDescribe (key 69), v0-1.

v1: MemberType (KIP-1099; always 1, consumer: no classic members inside consumer groups here).
A group that is not a consumer group, or unknown: GROUP_ID_NOT_FOUND with a message, as Kafka.
Not implemented: authorized operations (no ACLs: -2^31).
"""
from __future__ import annotations

from kafka.errors import UnsupportedVersionError
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.error_response import error_response
from minibroker.protocol.messages import (ConsumerGroupDescribeRequest,
                                          ConsumerGroupDescribeResponse)


@handles(ApiKey.ConsumerGroupDescribe, ConsumerGroupDescribeRequest, versions=(0, 1))
async def handle_consumer_group_describe(ctx: RequestContext, req: ConsumerGroupDescribeRequest
                                         ) -> ConsumerGroupDescribeResponse:
    if not ctx.services.consumer_group_protocol:
        # An emulated 3.x release: its brokers advertised the API but refused it unless
        # group.coordinator.rebalance.protocols named "consumer" (default "classic", KafkaApis).
        return error_response(req, ctx.api_version, UnsupportedVersionError.errno)
    groups = ctx.groups.consumer.describe(list(req.group_ids))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
