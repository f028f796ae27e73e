"""DescribeTopicPartitions (key 75), v0 (KIP-966): Metadata's topic part, paginated.

Topics sorted by name (all of them when none is named), from the cursor (topic, first partition)
on; at most min(response_partition_limit, 2000 — Kafka's max.request.partition.size.limit)
partitions per answer, then next_cursor names the partition to continue from (null at the end).
A named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION; a cursor topic that is not among
the named ones is INVALID_REQUEST for every topic, as Kafka refuses it. ELR (KIP-966's eligible
leader replicas) is not kept here: both ELR lists are empty. topic_authorized_operations: every
topic operation while there are no ACLs.
"""
from __future__ import annotations

import uuid
from typing import TypeAlias

from kafka.errors import (InvalidRequestError, LeaderNotAvailableError,
                          TopicAuthorizationFailedError, UnknownTopicOrPartitionError)
from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from kafka.protocol.api_key import ApiKey

from minibroker.broker import acl_operations
from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.metadata.cache import PartitionInfo
from minibroker.security.acl import AclOperation as Op, ResourceType as RT

_Topic: TypeAlias = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
_Partition: TypeAlias = (DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
                         .DescribeTopicPartitionsResponsePartition)
_Cursor = DescribeTopicPartitionsResponse.Cursor
MAX_PARTITIONS = 2000           # Kafka's max.request.partition.size.limit default
_ZERO_UUID = uuid.UUID(int=0)


def _error(name: str, code: int) -> _Topic:
    return _Topic(error_code=code, name=name, topic_id=_ZERO_UUID, is_internal=False,
                  partitions=[], topic_authorized_operations=acl_operations.bits(None))


def _partition(p: PartitionInfo) -> _Partition:
    return _Partition(error_code=0 if p.leader >= 0 else LeaderNotAvailableError.errno,
                      partition_index=p.partition, leader_id=p.leader,
                      leader_epoch=p.leader_epoch, replica_nodes=list(p.replicas),
                      isr_nodes=list(p.isr), eligible_leader_replicas=[], last_known_elr=[],
                      offline_replicas=list(p.offline_replicas))


@handles(ApiKey.DescribeTopicPartitions, DescribeTopicPartitionsRequest, versions=(0, 0))
async def handle_describe_topic_partitions(ctx: RequestContext,
                                           req: DescribeTopicPartitionsRequest
        ) -> DescribeTopicPartitionsResponse:
    cache = ctx.metadata
    named = sorted({t.name for t in req.topics or []})
    names = named or sorted(cache.topics)
    cursor = req.cursor
    if cursor is not None and named and cursor.topic_name not in named:
        return DescribeTopicPartitionsResponse(
            throttle_time_ms=0, next_cursor=None,
            topics=[_error(n, InvalidRequestError.errno) for n in named])
    limit = max(min(req.response_partition_limit, MAX_PARTITIONS), 1)
    topics, left, next_cursor = [], limit, None
    for name in names:
        if cursor is not None and name < cursor.topic_name:
            continue
        info = cache.topics.get(name)
        if not ctx.authorize(Op.DESCRIBE, RT.TOPIC, name):
            # KIP-11: a named topic is refused, an unnamed one left out
            if named:
                topics.append(_error(name, TopicAuthorizationFailedError.errno))
            continue
        if info is None:
            topics.append(_error(name, UnknownTopicOrPartitionError.errno))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        indexes = [i for i in sorted(info.partitions) if i >= first]
        if left == 0:
            next_cursor = _Cursor(topic_name=name, partition_index=indexes[0] if indexes else 0)
            break
        taken = indexes[:left]
        left -= len(taken)
        topics.append(_Topic(error_code=0, name=name, topic_id=info.topic_id,
                             is_internal=info.is_internal,
                             partitions=[_partition(info.partitions[i]) for i in taken],
                             topic_authorized_operations=acl_operations.bits(
                                 acl_operations.authorized(ctx, 2, name, True))))
        if len(taken) < len(indexes):
            next_cursor = _Cursor(topic_name=name, partition_index=indexes[len(taken)])
            break
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics,
                                           next_cursor=next_cursor)
