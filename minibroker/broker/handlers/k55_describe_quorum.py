"""DescribeQuorum (key 55), v0-2: the KRaft metadata quorum (kafka-metadata-quorum.sh).

Kafka 4 brokers serve it by forwarding to the active controller; here the quorum is the
cluster's (controller/quorum.py) and the channel describes it. Only `__cluster_metadata`-0
exists: another topic or partition is UNKNOWN_TOPIC_OR_PARTITION, as KRaft answers.
v1: last_fetch_timestamp, last_caught_up_timestamp.  v2: error messages, replica directory ids
(none here: the zero uuid), and `nodes` — the voters' listeners, none of their own here (the
controllers listen on their brokers' ports), so empty.
"""
from __future__ import annotations

import uuid
from typing import TypeAlias

from kafka.errors import UnknownTopicOrPartitionError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.controller.quorum import QuorumInfo, ReplicaState

METADATA_TOPIC = "__cluster_metadata"
_Topic = DescribeQuorumResponse.TopicData
_Partition: TypeAlias = DescribeQuorumResponse.TopicData.PartitionData
_Replica: TypeAlias = DescribeQuorumResponse.TopicData.PartitionData.ReplicaState


def _replica(r: ReplicaState) -> _Replica:
    return _Replica(replica_id=r.replica_id, replica_directory_id=uuid.UUID(int=0),
                    log_end_offset=r.log_end_offset, last_fetch_timestamp=r.last_fetch_timestamp,
                    last_caught_up_timestamp=r.last_caught_up_timestamp)


def _partition(index: int, q: QuorumInfo | None) -> _Partition:
    if q is None:
        return _Partition(partition_index=index, error_code=UnknownTopicOrPartitionError.errno,
                          error_message=None, leader_id=-1, leader_epoch=-1, high_watermark=-1,
                          current_voters=[], observers=[])
    return _Partition(partition_index=index, error_code=0, error_message=None,
                      leader_id=q.leader_id, leader_epoch=q.leader_epoch,
                      high_watermark=q.high_watermark,
                      current_voters=[_replica(r) for r in q.voters],
                      observers=[_replica(r) for r in q.observers])


@handles(ApiKey.DescribeQuorum, DescribeQuorumRequest, versions=(0, 2))
async def handle_describe_quorum(ctx: RequestContext, req: DescribeQuorumRequest
                                 ) -> DescribeQuorumResponse:
    quorum = await ctx.controller.describe_quorum()
    topics = [_Topic(topic_name=t.topic_name, partitions=[
        _partition(p.partition_index, quorum if (t.topic_name, p.partition_index)
                   == (METADATA_TOPIC, 0) else None) for p in t.partitions])
        for t in req.topics]
    return DescribeQuorumResponse(error_code=0, error_message=None, topics=topics, nodes=[])
