"""ConsumerGroupHeartbeat (key 68), v0-1 — KIP-848's consumer rebalance protocol.

v0: the coordinator names a joining member.  v1: the consumer names itself (MemberId required),
SubscribedTopicRegex (librdkafka 2.16 sends v1 exactly).
Joining (member epoch 0), heartbeating, reconciling (partitions are revoked before they are
reassigned), leaving (-1, static -2), fencing; KIP-1101 MetadataHash checked on every heartbeat.
The answer waits for the heartbeat's records to reach the high watermark of __consumer_offsets.
Not implemented: members on the classic protocol inside a consumer group (online migration).
"""
from __future__ import annotations

import asyncio

from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import consumer_group_protocol
from minibroker.broker.handlers.k11_join_group import client_host
from minibroker.protocol.messages import (ConsumerGroupHeartbeatRequest,
                                          ConsumerGroupHeartbeatResponse)


@handles(ApiKey.ConsumerGroupHeartbeat, ConsumerGroupHeartbeatRequest, versions=(0, 1))
@consumer_group_protocol
async def handle_consumer_group_heartbeat(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
                                          ) -> ConsumerGroupHeartbeatResponse:
    waiter: asyncio.Future[ConsumerGroupHeartbeatResponse] = ctx.groups.consumer.heartbeat(
        req, ctx.api_version, ctx.header.client_id or "", client_host(ctx))
    return await waiter
