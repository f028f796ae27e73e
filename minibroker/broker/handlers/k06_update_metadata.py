"""UpdateMetadata (key 6), v8 plus KIP-253's tagged fields (counts, partition epochs, epoch maps).

Sent only by the controller; the broker's metadata cache is exactly what these requests said.
A partition whose leader is -2 (LeaderDuringDelete) belongs to a deleted topic.
"""
from __future__ import annotations

from kafka.protocol.api_key import ApiKey

from minibroker.broker.dispatch import RequestContext, handles
from minibroker.broker.metadata_cache import BrokerInfo, PartitionInfo, TopicInfo
from minibroker.broker.topic_names import INTERNAL_TOPICS
from minibroker.protocol.messages import UpdateMetadataRequest, UpdateMetadataResponse

LEADER_DURING_DELETE = -2


def _pairs(entries):
    return tuple((e.partition_index, e.leader_epoch) for e in entries or ())


@handles(ApiKey.UpdateMetadata, UpdateMetadataRequest, versions=(8, 8))
async def handle_update_metadata(ctx: RequestContext, req: UpdateMetadataRequest):
    broker = ctx.broker
    err = broker.replica_manager.check_controller_epoch(req.controller_epoch)
    if err:
        return UpdateMetadataResponse(error_code=err)
    cache = broker.metadata
    cache.controller_id = req.controller_id
    cache.controller_epoch = req.controller_epoch
    cache.max_partition_epoch = req.max_partition_epoch
    cache.update_brokers([BrokerInfo(b.id, b.endpoints[0].host, b.endpoints[0].port, b.rack)
                          for b in req.live_brokers])
    for t in req.topic_states:
        parts = t.partition_states
        if parts and parts[0].leader == LEADER_DURING_DELETE:
            cache.remove_topic(t.topic_name)
            continue
        cache.put_topic(TopicInfo(
            name=t.topic_name, topic_id=t.topic_id, is_internal=t.topic_name in INTERNAL_TOPICS,
            partitions={p.partition_index: PartitionInfo(
                p.partition_index, p.leader, p.leader_epoch, p.partition_epoch, tuple(p.isr),
                tuple(p.replicas), tuple(p.offline_replicas),
                _pairs(p.leader_epoch_after_creation), _pairs(p.leader_epoch_before_deletion))
                for p in parts},
            initial_partition_count=t.initial_partition_count,
            undeleted_partition_count=t.undeleted_partition_count,
            configs={c.name: c.value for c in t.configs or ()}))
    broker.replica_manager.on_metadata_update([t.topic_name for t in req.topic_states])
    return UpdateMetadataResponse(error_code=0)
