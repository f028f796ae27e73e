"""TxnOffsetCommit (key 28), v0-4: a transactional producer's consumer offsets, sent to the group
coordinator after AddOffsetsToTxn; pending until the transaction's marker reaches the group's
__consumer_offsets partition (minibroker.coordinator.txn_offsets).
v2: committed_leader_epoch.  v3: generation_id / member_id / group_instance_id (KIP-447: a zombie
member's commit is fenced), flexible.  A fenced producer (an older epoch): PRODUCER_FENCED from v3,
INVALID_PRODUCER_EPOCH before (KIP-588).
Not offered: v5 (KIP-890 part 2, transaction.version 2)."""
from __future__ import annotations

from kafka.errors import InvalidProducerEpochError, ProducerFencedError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.broker.handler_helper import partition_codes
from minibroker.coordinator.txn_offsets import commit_txn_offsets

_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Part = _Topic.TxnOffsetCommitResponsePartition


@handles(ApiKey.TxnOffsetCommit, TxnOffsetCommitRequest, versions=(0, 4))
async def handle_txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest
        ) -> TxnOffsetCommitResponse:
    v = ctx.api_version
    offsets = [(t.name, p.partition_index, p.committed_offset,
                p.committed_leader_epoch if v >= 2 else -1, p.committed_metadata)
               for t in req.topics for p in t.partitions]
    results = await commit_txn_offsets(
        ctx.groups, req.group_id, req.producer_id, req.producer_epoch,
        req.generation_id if v >= 3 else -1, (req.member_id or "") if v >= 3 else "",
        req.group_instance_id if v >= 3 else None, offsets)
    if v < 3:       # KIP-588: older clients know only INVALID_PRODUCER_EPOCH
        results = {tp: InvalidProducerEpochError.errno if code == ProducerFencedError.errno
                   else code for tp, code in results.items()}
    return TxnOffsetCommitResponse(throttle_time_ms=0,
                                   topics=partition_codes(req.topics, _Topic, _Part, results))
