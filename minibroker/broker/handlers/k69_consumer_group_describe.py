"""ConsumerGroupDescribe (key 69), v0-1.

v1: MemberType (KIP-1099; always 1, consumer: no classic members inside consumer groups here).
A group that is not a consumer group, or unknown: GROUP_ID_NOT_FOUND with a message, as Kafka.
include_authorized_operations: the group operations the ACLs allow the caller (every one
without an authorizer, KIP-430), else -2^31. With an authorizer, DESCRIBE on each group is
checked before (GROUP_AUTHORIZATION_FAILED, broker/authorization.py).
Not implemented: Kafka also refuses a group whose assigned topics the caller may not DESCRIBE.
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from minibroker.broker import acl_operations
from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import consumer_group_protocol
from minibroker.protocol.messages import (ConsumerGroupDescribeRequest,
                                          ConsumerGroupDescribeResponse)


@handles(ApiKey.ConsumerGroupDescribe, ConsumerGroupDescribeRequest, versions=(0, 1))
@consumer_group_protocol
async def handle_consumer_group_describe(ctx: RequestContext, req: ConsumerGroupDescribeRequest
                                         ) -> ConsumerGroupDescribeResponse:
    groups = ctx.groups.consumer.describe(list(req.group_ids))
    if req.include_authorized_operations:
        for g in groups:
            if not g.error_code:
                g.authorized_operations = acl_operations.bits(
                    acl_operations.authorized(ctx, 3, g.group_id, True))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
