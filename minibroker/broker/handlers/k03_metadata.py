"""Metadata (key 3), v0-13.

v1: null topics = all, is_internal, controller_id.  v2: cluster_id.  v4: allow_auto_topic_creation.
v5: offline_replicas.  v7: leader_epoch.  v8: include_{cluster (to v10),topic}_authorized_operations:
every operation without an authorizer (broker/acl_operations.py), else those the ACLs allow;
-2^31 when not asked. With an authorizer (KIP-11): topics the principal may not DESCRIBE are
hidden (all topics) or TOPIC_AUTHORIZATION_FAILED (named); auto-creation needs CREATE on the
cluster or the topic.
v9: flexible.  v10: topic ids.  v13: top-level error_code.
KIP-253: initial/undeleted partition counts, partition_epoch, max_partition_epoch as tagged
fields (see schemas/README.md).
Two caches in the broker's MetadataCache: each topic's encoded entry per version (dropped when
that topic changes), and whole encoded responses per (version, requested topics), dropped on any
change. A response is the skeleton (brokers, cluster, controller) with the topic entries spliced in,
so after one topic changes only that topic is encoded again (an all-topics response at 20,000
partitions took 0.4 s to build from objects). A request that triggers auto-creation is never cached.
Auto-creation: Kafka answers LEADER_NOT_AVAILABLE for a topic it has just asked the controller to
create, and the client asks again (librdkafka after 100 ms: a producer's first delivery to a new
topic took ~100 ms here, ~50 against the librdkafka mock). The controller is in process and
creates a topic in milliseconds, so the request waits for it (up to _AUTO_CREATE_WAIT_MS) and is
answered with the topic; past that wait, with LEADER_NOT_AVAILABLE as Kafka's is.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, TypeAlias

from kafka.errors import (InvalidTopicError, LeaderNotAvailableError,
                          TopicAuthorizationFailedError, UnknownTopicIdError,
                          UnknownTopicOrPartitionError)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.schemas.fields.codecs.encode_buffer import EncodeBufferPool

from minibroker.broker import acl_operations
from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import RawResponse, handles
from minibroker.broker.metadata_wait import topic_has_leaders, wait_for_metadata
from minibroker.metadata.cache import MetadataCache, TopicInfo
from minibroker.protocol.framing import frame_parts, response_header
from minibroker.protocol.topic_names import invalid_reason
from minibroker.protocol.messages import MetadataResponseKip253 as MetadataResponse
from minibroker.protocol.varint import uvarint_bytes as _uvarint
from minibroker.security.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as RT
from minibroker.security.authorizer import StandardAuthorizer

_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition
# a _Topic, to mypy: kafka-python's classes hang them off the response class at run time
TopicEntry: TypeAlias = Any
_ZERO_UUID = uuid.UUID(int=0)
_TOPICS = MetadataResponse._struct.fields["topics"]
_AUTO_CREATE_WAIT_MS = 500


def _topic_entry(topic: TopicInfo, version: int,
                 operations: frozenset[int] | None = acl_operations.OMITTED) -> TopicEntry:
    parts = []
    for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
        parts.append(_Partition(
            error_code=0 if p.leader >= 0 else LeaderNotAvailableError.errno,
            partition_index=p.partition, leader_id=p.leader, leader_epoch=p.leader_epoch,
            replica_nodes=list(p.replicas), isr_nodes=list(p.isr),
            offline_replicas=list(p.offline_replicas), partition_epoch=p.partition_epoch))
    return _Topic(error_code=0, name=topic.name, topic_id=topic.topic_id,
                  is_internal=topic.is_internal, partitions=parts,
                  authorized_operations=operations,
                  initial_partition_count=topic.initial_partition_count,
                  undeleted_partition_count=topic.undeleted_partition_count)


def _error_entry(code: int, name: str | None, topic_id: uuid.UUID = _ZERO_UUID) -> TopicEntry:
    return _Topic(error_code=code, name=name, topic_id=topic_id, is_internal=False,
                  partitions=[], authorized_operations=None)


def _encode_entry(entry: TopicEntry, version: int) -> bytes:
    """One element of the topics array, as the whole response's encoder writes it."""
    flexible = version >= 9
    encode = _TOPICS.array_of.compiled_encode_into(version, compact=flexible, tagged=flexible)
    with EncodeBufferPool.acquire() as out:
        encode(entry, out)
        return bytes(out.result())


def _cached_entry(cache: MetadataCache, topic: TopicInfo, version: int,
                  operations: frozenset[int] | None = acl_operations.OMITTED) -> bytes:
    per_version = cache.encoded.setdefault(topic.name, {})
    key = version if operations is None else (version, operations)
    entry = per_version.get(key)
    if entry is None:
        entry = per_version[key] = _encode_entry(_topic_entry(topic, version, operations), version)
    return entry


def _splice(skeleton: MetadataResponse, version: int, entries: list[bytes]) -> bytes:
    """The encoded `skeleton` (a response with no topics) with `entries` as its topics array."""
    flexible = version >= 9
    raw = bytes(skeleton.encode(version=version))
    at = 0                              # the topics array follows these fields
    for f in MetadataResponse._struct.untagged_fields(version):
        if f.name == "topics":
            break
        at += len(f.encode(getattr(skeleton, f.name), version=version, compact=flexible,
                           tagged=flexible))
    if flexible:
        count, empty = _uvarint(len(entries) + 1), 1
    else:
        count, empty = len(entries).to_bytes(4, "big"), 4
    return b"".join([raw[:at], count, *entries, raw[at + empty:]])


_MAX_CACHED_RESPONSES = 1024


@handles(ApiKey.Metadata, MetadataRequest, versions=(0, 13))
async def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> RawResponse:
    cache = ctx.metadata
    version = ctx.api_version
    wanted = None if req.topics is None else tuple(
        (t.name, t.topic_id if version >= 10 else None) for t in req.topics)
    auto = ctx.config.auto_create_topics_enable and (
        version < 4 or bool(req.allow_auto_topic_creation))
    ops = (version >= 8 and bool(req.include_topic_authorized_operations),
           8 <= version <= 10 and bool(req.include_cluster_authorized_operations))

    def key() -> tuple[object, ...]:
        return (version, wanted, auto, ops, cache.generation, cache.controller_id, cache.cluster_id,
                cache.max_partition_epoch, ctx.listener)     # each listener has its endpoints
    # Answers depend on the principal once ACLs are on: built each time then.
    shared = ctx.authorizer is None
    body = cache.responses.get(key()) if shared else None
    if body is None:
        body, to_create = _metadata(ctx, req)
        if to_create:
            creating, names = ctx.controller.auto_create_topics(to_create), to_create
            if await wait_for_metadata(ctx, lambda: creating.done() or all(
                    topic_has_leaders(ctx, n, 1) for n in names), _AUTO_CREATE_WAIT_MS):
                # topics the controller turned down stay LEADER_NOT_AVAILABLE, uncached
                body, to_create = _metadata(ctx, req)
        if not to_create and shared:
            if len(cache.responses) >= _MAX_CACHED_RESPONSES:
                cache.responses.clear()
            cache.responses[key()] = body
    return RawResponse(frame_parts([response_header(ctx.header.correlation_id, version >= 9), body]))


def _metadata(ctx: RequestContext, req: MetadataRequest) -> tuple[bytes, list[str]]:
    """The encoded response body, and the requested topics to auto-create (LEADER_NOT_AVAILABLE
    in the body). With an authorizer (KafkaApis.getTopicMetadata): a topic the principal may not
    DESCRIBE is left out of an all-topics answer and answers TOPIC_AUTHORIZATION_FAILED when
    named; a missing topic is auto-created only with CREATE on the cluster or on the topic (else
    TOPIC_AUTHORIZATION_FAILED); authorized_operations come from the ACLs. Without one, every
    check passes (ctx.authorize) and authorized_operations are every operation."""
    cache, version, authz = ctx.metadata, ctx.api_version, ctx.authorizer
    want_ops = version >= 8 and bool(req.include_topic_authorized_operations)
    every_op = acl_operations.topic_operations(want_ops)

    def entry(info: TopicInfo) -> bytes:
        ops = every_op if authz is None or not want_ops else authz.authorized_operations(
            ctx.principal, ctx.client_host, RT.TOPIC, info.name)
        return _cached_entry(cache, info, version, ops)
    if req.topics is None or (version == 0 and not req.topics):
        topics = [entry(cache.topics[n]) for n in sorted(cache.topics)
                  if ctx.authorize(Op.DESCRIBE, RT.TOPIC, n)]
        to_create: list[str] = []
    else:
        topics, to_create = _named_topics(ctx, req, entry)
    return _splice(_skeleton(cache, _cluster_operations(ctx, req), ctx.listener), version,
                   topics), to_create


def _named_topics(ctx: RequestContext, req: MetadataRequest, entry: Callable[[TopicInfo], bytes]
                  ) -> tuple[list[bytes], list[str]]:
    """The entries of the topics a request names (by name, or by id from v10), and the names
    to auto-create."""
    cache, version = ctx.metadata, ctx.api_version
    auto = ctx.config.auto_create_topics_enable and (
        version < 4 or req.allow_auto_topic_creation)
    topics: list[bytes] = []
    to_create: list[str] = []
    for t in req.topics:
        name = t.name
        if name is None and version >= 10 and t.topic_id not in (None, _ZERO_UUID):
            info = cache.topics_by_id.get(t.topic_id)
            if info is None:
                code = UnknownTopicIdError.errno
            elif not ctx.authorize(Op.DESCRIBE, RT.TOPIC, info.name):
                code = TopicAuthorizationFailedError.errno
            else:
                topics.append(entry(info))
                continue
            topics.append(_encode_entry(_error_entry(code, None, t.topic_id), version))
            continue
        info = cache.topics.get(name)
        if not ctx.authorize(Op.DESCRIBE, RT.TOPIC, name):
            code = TopicAuthorizationFailedError.errno
        elif info is not None:
            topics.append(entry(info))
            continue
        elif invalid_reason(name):
            code = InvalidTopicError.errno
        elif not auto:
            code = UnknownTopicOrPartitionError.errno
        elif ctx.authorize(Op.CREATE, RT.CLUSTER, CLUSTER_NAME) or \
                ctx.authorize(Op.CREATE, RT.TOPIC, name):
            to_create.append(name)
            code = LeaderNotAvailableError.errno
        else:
            code = TopicAuthorizationFailedError.errno
        topics.append(_encode_entry(_error_entry(code, name), version))
    return topics, to_create


def _cluster_operations(ctx: RequestContext, req: MetadataRequest) -> frozenset[int] | None:
    """v8-10's cluster authorized_operations: every one without an authorizer, else the ACLs'
    (none without DESCRIBE on the cluster)."""
    asked = 8 <= ctx.api_version <= 10 and bool(req.include_cluster_authorized_operations)
    authz = ctx.authorizer
    if authz is None or not asked:
        return acl_operations.cluster_operations(asked)
    if not ctx.authorize(Op.DESCRIBE, RT.CLUSTER, CLUSTER_NAME):
        return frozenset()
    return authz.authorized_operations(ctx.principal, ctx.client_host, RT.CLUSTER, CLUSTER_NAME)


def _skeleton(cache: MetadataCache, cluster_ops: frozenset[int] | None, listener: str
              ) -> MetadataResponse:
    brokers = [_Broker(node_id=b.node_id, host=host, port=port, rack=b.rack)
               for b in cache.alive_brokers() for host, port in (b.address(listener),)]
    return MetadataResponse(
        throttle_time_ms=0, brokers=brokers, cluster_id=cache.cluster_id,
        controller_id=cache.controller_id, topics=[],
        authorized_operations=cluster_ops, error_code=0,
        max_partition_epoch=cache.max_partition_epoch)
