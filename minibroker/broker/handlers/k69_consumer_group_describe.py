"""ConsumerGroupDescribe (key 69), v0-1.

v1: MemberType (KIP-1099; always 1, consumer: no classic members inside consumer groups here).
A group that is not a consumer group, or unknown: GROUP_ID_NOT_FOUND with a message, as Kafka.
include_authorized_operations: the group operations the ACLs allow the caller (every one
without an authorizer, KIP-430), else -2^31. With an authorizer, DESCRIBE on each group is
checked before (GROUP_AUTHORIZATION_FAILED, broker/authorization.py).
Not implemented: Kafka also refuses a group whose assigned topics the caller may not DESCRIBE.
"""
from __future__ import annotations

from typing import cast

from kafka.errors import UnsupportedVersionError
from kafka.protocol.api_key import ApiKey

from minibroker.broker import acl_operations
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
        return cast(ConsumerGroupDescribeResponse,
                    error_response(req, ctx.api_version, UnsupportedVersionError.errno))
    groups = ctx.groups.consumer.describe(list(req.group_ids))
    if req.include_authorized_operations:
        for g in groups:
            if not g.error_code:
                g.authorized_operations = acl_operations.bits(
                    acl_operations.authorized(ctx, 3, g.group_id, True))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
