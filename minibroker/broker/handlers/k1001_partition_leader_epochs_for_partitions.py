"""PartitionLeaderEpochsForPartitions (key 1001, ours), v0 — KIP-253 part 5.

For each requested partition: its whole leaderEpochAfterCreation and leaderEpochBeforeDeletion
maps (partition → leader epoch), as this broker's metadata cache holds them from UpdateMetadata.
The seed sends it to the group coordinator; every broker can answer it, so we accept it anywhere.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kafka.errors import UnknownTopicOrPartitionError

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.protocol.messages import (PartitionLeaderEpochsForPartitionsRequest,
                                          PartitionLeaderEpochsForPartitionsResponse, PrivateApiKey)

_Topic = PartitionLeaderEpochsForPartitionsResponse.PartitionLeaderEpochsForPartitionsResponseTopic
_Part = _Topic.PartitionLeaderEpochsForPartitionsResponsePartition


def _entries(cls: Any, pairs: Iterable[tuple[int, int]]) -> list[Any]:
    return [cls(partition_index=p, leader_epoch=e) for p, e in pairs]


@handles(PrivateApiKey.PartitionLeaderEpochsForPartitions,
         PartitionLeaderEpochsForPartitionsRequest, versions=(0, 0))
async def handle_partition_leader_epochs_for_partitions(
        ctx: RequestContext, req: PartitionLeaderEpochsForPartitionsRequest
        ) -> PartitionLeaderEpochsForPartitionsResponse:
    cache = ctx.metadata
    topics = []
    for t in req.topics:
        info = cache.topics.get(t.topic)
        if info is None:
            topics.append(_Topic(topic=t.topic, error_code=UnknownTopicOrPartitionError.errno,
                                 partitions=[]))
            continue
        parts = []
        for pid in t.partitions:
            p = info.partitions.get(pid)
            if p is None:
                parts.append(_Part(partition=pid, error_code=UnknownTopicOrPartitionError.errno,
                                   leader_epoch_after_creation=[],
                                   leader_epoch_before_deletion=[]))
                continue
            parts.append(_Part(
                partition=pid, error_code=0,
                leader_epoch_after_creation=_entries(_Part.PartitionLeaderEpochAfterCreation,
                                                     p.leader_epoch_after_creation),
                leader_epoch_before_deletion=_entries(_Part.PartitionLeaderEpochBeforeDeletion,
                                                      p.leader_epoch_before_deletion)))
        topics.append(_Topic(topic=t.topic, error_code=0, partitions=parts))
    return PartitionLeaderEpochsForPartitionsResponse(throttle_time_ms=0, error_code=0,
                                                      topics=topics)
