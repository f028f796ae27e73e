"""UpdateMetadata (key 6), v8 plus KIP-253's tagged fields (counts, partition epochs, epoch maps).

Sent only by the controller; the broker's metadata cache is exactly what these requests said.
A partition whose leader is -2 (LeaderDuringDelete) belongs to a deleted topic. A topic of more
partitions than one request carries (propagator.CHUNK_PARTITIONS) comes in pieces on one
connection, all but the last marked MorePartitions (our tagged field); it is applied whole.

Propagation delay (our extension, for clients that must survive stale metadata): with
`minibroker.metadata.propagation.delay.ms` (or Cluster.set_metadata_propagation_delay at run time)
above 0, the request is acknowledged at once and applied that much later, requests in arrival
order; meanwhile this broker answers Metadata from the older state while others may be current.
LeaderAndIsr is not delayed: a broker enforces a new partition count before clients learn it.
A *lost* UpdateMetadata (Cluster.lose_update_metadata) is acknowledged and never applied, as one
lost on its way: the broker keeps answering from what it knew until a later one reaches it.
"""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import Any

from kafka.protocol.api_key import ApiKey

from minibroker.security.credentials import SCRAM_MECHANISM_NAMES, ScramCredential
from minibroker.broker.control_requests import check_control_request
from minibroker.broker.context import RequestContext, Services
from minibroker.broker.dispatch import handles
from minibroker.metadata.cache import BrokerInfo, PartitionInfo, TopicInfo
from minibroker.protocol.topic_names import INTERNAL_TOPICS
from minibroker.protocol.messages import UpdateMetadataRequest, UpdateMetadataResponse
from minibroker.security.acl import binding_of

LEADER_DURING_DELETE = -2


def _pairs(entries: Iterable[Any] | None) -> tuple[tuple[int, int], ...]:
    return tuple((e.partition_index, e.leader_epoch) for e in entries or ())


@handles(ApiKey.UpdateMetadata, UpdateMetadataRequest, versions=(8, 8))
async def handle_update_metadata(ctx: RequestContext, req: UpdateMetadataRequest
        ) -> UpdateMetadataResponse:
    err = check_control_request(ctx, req)
    if err:
        return UpdateMetadataResponse(error_code=err)
    if ctx.faults.take_lost_update_metadata(ctx.node_id):
        return UpdateMetadataResponse(error_code=0)
    state = ctx.services.pending_metadata
    topics = _complete_topics(state.pieces.setdefault(ctx.conn, {}), req.topic_states)
    delay_ms = ctx.faults.update_metadata_delay_ms.get(
        ctx.node_id, ctx.config.minibroker_metadata_propagation_delay_ms)
    pending = state.task
    if delay_ms <= 0 and (pending is None or pending.done()):
        _apply(ctx.services, req, topics)
    else:
        due = ctx.clock.monotonic() + max(delay_ms, 0) / 1000
        state.task = asyncio.get_running_loop().create_task(
            _apply_later(ctx.services, req, topics, pending, due))
    return UpdateMetadataResponse(error_code=0)


# a topic's pieces so far: (its topic id, its partitions)
Pieces = dict[str, tuple[uuid.UUID, dict[int, PartitionInfo]]]


def _complete_topics(pieces: Pieces, topic_states: Iterable[Any]) -> list[TopicInfo | str]:
    """The topics this request completes: a TopicInfo, or the name of a deleted topic. A topic
    sent in pieces (MorePartitions on all but the last) is held in `pieces` (this controller
    connection's) until its last piece: clients never see part of a topic's partitions. Each
    piece's partitions are converted as it arrives, so no request does more than its share."""
    out: list[TopicInfo | str] = []
    for t in topic_states:
        parts = t.partition_states
        if parts and parts[0].leader == LEADER_DURING_DELETE:
            pieces.pop(t.topic_name, None)
            if not t.more_partitions:
                out.append(t.topic_name)
            continue
        held = pieces.pop(t.topic_name, None)
        partitions = held if held is not None and held[0] == t.topic_id else (t.topic_id, {})
        partitions[1].update((p.partition_index, PartitionInfo(
            p.partition_index, p.leader, p.leader_epoch, p.partition_epoch, tuple(p.isr),
            tuple(p.replicas), tuple(p.offline_replicas),
            _pairs(p.leader_epoch_after_creation), _pairs(p.leader_epoch_before_deletion)))
            for p in parts)
        if t.more_partitions:
            pieces[t.topic_name] = partitions
            continue
        out.append(TopicInfo(
            name=t.topic_name, topic_id=t.topic_id, is_internal=t.topic_name in INTERNAL_TOPICS,
            partitions=partitions[1], initial_partition_count=t.initial_partition_count,
            undeleted_partition_count=t.undeleted_partition_count,
            configs={c.name: c.value for c in t.configs or ()}))
    return out


async def _apply_later(services: Services, req: UpdateMetadataRequest,
                       topics: list[TopicInfo | str], before: asyncio.Task[None] | None,
                       due: float) -> None:
    if before is not None:
        await asyncio.gather(before, return_exceptions=True)
    await services.clock.sleep(max(0.0, due - services.clock.monotonic()))
    _apply(services, req, topics)


def _apply(services: Services, req: UpdateMetadataRequest, topics: list[TopicInfo | str]) -> None:
    cache = services.metadata
    cache.controller_id = req.controller_id
    cache.controller_epoch = req.controller_epoch
    cache.max_partition_epoch = req.max_partition_epoch
    cache.metadata_offset = req.metadata_offset
    cache.update_brokers([BrokerInfo(b.id, b.endpoints[0].host, b.endpoints[0].port, b.rack,
                                     tuple((e.listener, e.host, e.port) for e in b.endpoints))
                          for b in req.live_brokers])
    names = []
    for t in topics:
        if isinstance(t, str):
            cache.remove_topic(t)
            names.append(t)
        else:
            cache.put_topic(t)
            names.append(t.name)
    services.node.apply_dynamic_configs(req.broker_configs or ())
    if req.acls is not None and services.authorizer is not None:
        services.authorizer.set_acls(binding_of(e) for e in req.acls)
    if req.scram_credentials is not None:
        services.credentials.replace_scram({
            (c.name, SCRAM_MECHANISM_NAMES[c.mechanism]): ScramCredential(
                bytes(c.salt), bytes(c.stored_key), bytes(c.server_key), c.iterations)
            for c in req.scram_credentials if c.mechanism in SCRAM_MECHANISM_NAMES})
    services.replica_manager.on_metadata_update(names)
