"""Produce (key 0), v3-12.

v3: transactional_id, magic 2 only.  v5: log_start_offset.  v8: record_errors, error_message.
v9: flexible.  v10-12: KIP-951 leader discovery: a NOT_LEADER_OR_FOLLOWER partition names the
current leader (tag 0) and the response lists those leaders' endpoints (node_endpoints).
acks: 0 (no response), 1 (leader append), -1 (wait for the high watermark; min.insync.replicas).
Transactional produce (KIP-98): a batch that would open a transaction in a partition is first
verified with the transactional id's coordinator (broker/txn_verify.py, KIP-890 part 1).
KIP-253: a topic's undeleted_partition_count (tag 10000, v9+) must match the leader's, else
INVALID_PARTITION_METADATA per partition; writes into partitions marked for deletion are refused.
KIP-11 (with an authorizer): WRITE on the transactional id, else every partition answers
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; WRITE on each topic, else TOPIC_AUTHORIZATION_FAILED.
Hot path: the body is decoded by minibroker.protocol.fast (records stay memoryviews of the frame).
The append itself (and acks=all waiting) is ReplicaManager.append_records / await_replication.
"""
from __future__ import annotations

from collections.abc import Iterable

from kafka.errors import (InvalidRequiredAcksError, NotLeaderForPartitionError,
                          TopicAuthorizationFailedError, TransactionalIdAuthorizationFailedError)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import ProduceRequest

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import RawResponse, handles
from minibroker.broker.leader_hints import LeaderHints
from minibroker.broker.txn_verify import verify_transactional
from minibroker.protocol.fast import (
    NodeEndpoint, ProduceRequestView, ProduceTopic, decode_produce)
from minibroker.protocol.produce_response import PartitionResult as _part
from minibroker.protocol.produce_response import encode_produce_response
from minibroker.security.acl import AclOperation as Op, ResourceType as RT


# The longest a Produce answer waits for the log memory to come back under its cap.
HOLD_MAX_MS = 1000


def _refused(topics: Iterable[ProduceTopic], error_code: int) -> dict[str, list[_part]]:
    return {td.name: [_part(pd.index, error_code) for pd in td.partitions] for td in topics}


def _leader_hints(ctx: RequestContext, results: dict[str, list[_part]]) -> list[NodeEndpoint]:
    """KIP-951 (v10+): the current leader of each NOT_LEADER_OR_FOLLOWER partition; endpoints."""
    hints = None
    for topic, parts in results.items():
        for part in parts:
            if part.error_code == NotLeaderForPartitionError.errno:
                hints = hints or LeaderHints(ctx.metadata)
                part.current_leader = hints.current_leader(topic, part.index)
    return hints.node_endpoints() if hints is not None else []


@handles(ApiKey.Produce, ProduceRequest, versions=(3, 12), raw=True)
async def handle_produce(ctx: RequestContext, body: memoryview | ProduceRequestView
                         ) -> RawResponse | None:
    # the protocol trace hands over the body it decoded (broker/trace.py): decoded once
    req = body if isinstance(body, ProduceRequestView) else decode_produce(body, ctx.api_version)
    acks = req.acks
    if acks not in (0, 1, -1):
        results = _refused(req.topics, InvalidRequiredAcksError.errno)
    elif req.transactional_id is not None and \
            not ctx.authorize(Op.WRITE, RT.TRANSACTIONAL_ID, req.transactional_id):
        results = _refused(req.topics, TransactionalIdAuthorizationFailedError.errno)
    else:
        rm = ctx.replica_manager
        topics, refused = req.topics, {}
        if ctx.authorizer is not None:          # KIP-11: WRITE on each topic
            denied = [td for td in topics if not ctx.authorize(Op.WRITE, RT.TOPIC, td.name)]
            if denied:
                refused = {(td.name, pd.index): TopicAuthorizationFailedError.errno
                           for td in denied for pd in td.partitions}
                names = {td.name for td in denied}
                topics = [td for td in topics if td.name not in names]
        if req.transactional_id is not None and topics and ctx.services.transaction_verification:
            unverified = await verify_transactional(ctx.services, req.transactional_id, topics)
            if unverified:
                refused.update(unverified)
                topics = [ProduceTopic(td.name, [pd for pd in td.partitions
                                                 if (td.name, pd.index) not in refused],
                                       td.undeleted_partition_count) for td in topics]
        results, waits = rm.append_records(topics, acks)
        for (topic, index), code in sorted(refused.items()):
            results.setdefault(topic, []).append(_part(index, code))
        memory = rm.log_memory
        if waits or memory.over():
            timeout_ms = req.timeout_ms
            # The log holds its own copy (or the large frame's own buffer) now: let go of the
            # request frame while waiting, so the network layer can reuse a shared receive buffer.
            del body, req
            ctx.frame = None
            if waits:
                await rm.await_replication(waits, timeout_ms)
            if memory.over():       # followers behind: hold the producer back (log/memory.py)
                await memory.room(min(max(timeout_ms, 0), HOLD_MAX_MS) / 1000)
    if acks == 0:
        return None
    endpoints = _leader_hints(ctx, results) if ctx.api_version >= 10 else None
    return RawResponse(encode_produce_response(ctx.api_version, ctx.header.correlation_id, results,
                                               node_endpoints=endpoints))
