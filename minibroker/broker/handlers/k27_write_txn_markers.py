"""WriteTxnMarkers (key 27), v1-2: a transaction coordinator's COMMIT/ABORT markers, appended by
this broker as leader of each partition (a control batch, origin coordinator: the producer's epoch
is fenced, its open transaction ends) and answered once replicated (acks=all). Inter-broker, on
the regular listener as in Kafka. v2's transaction_version is accepted (markers are the same)."""
from __future__ import annotations

import asyncio
from typing import Any

from kafka.errors import NotLeaderForPartitionError, RequestTimedOutError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles

MARKER_TIMEOUT_S = 25.0         # below the coordinator's 30 s request timeout
_Result = WriteTxnMarkersResponse.WritableTxnMarkerResult
_TopicResult = _Result.WritableTxnMarkerTopicResult
_PartResult = _TopicResult.WritableTxnMarkerPartitionResult


async def _code(fut: asyncio.Future[int] | int) -> int:
    """0 once the high watermark passed the marker, else its error (REQUEST_TIMED_OUT after the
    coordinator's own request timeout; NOT_LEADER when leadership moved meanwhile)."""
    if isinstance(fut, int):
        return fut
    try:
        return await asyncio.wait_for(asyncio.shield(fut), MARKER_TIMEOUT_S)
    except asyncio.TimeoutError:
        return int(RequestTimedOutError.errno)
    except asyncio.CancelledError:
        if fut.cancelled():
            return int(NotLeaderForPartitionError.errno)
        raise


@handles(ApiKey.WriteTxnMarkers, WriteTxnMarkersRequest, versions=(1, 2))
async def handle_write_txn_markers(ctx: RequestContext, req: WriteTxnMarkersRequest
        ) -> WriteTxnMarkersResponse:
    rm = ctx.replica_manager
    now = ctx.clock.now_ms()
    pending = []            # (marker index, topic, partition, future or error code)
    for i, m in enumerate(req.markers):
        for t in m.topics:
            for partition in t.partition_indexes:
                fut = rm.write_txn_marker(t.name, partition, m.transaction_result, m.producer_id,
                                          m.producer_epoch, m.coordinator_epoch, now)
                if not isinstance(fut, int):
                    ctx.groups.on_txn_marker(t.name, partition, m.producer_id,
                                             m.transaction_result)
                pending.append((i, t.name, partition, fut))
    codes = await asyncio.gather(*(_code(f) for *_, f in pending))
    results = [_Result(producer_id=m.producer_id, topics=[]) for m in req.markers]
    by_topic: dict[tuple[int, str], list[Any]] = {}
    for (i, topic, partition, _), code in zip(pending, codes):
        parts = by_topic.get((i, topic))
        if parts is None:
            parts = by_topic[(i, topic)] = []
            results[i].topics.append(_TopicResult(name=topic, partitions=parts))
        parts.append(_PartResult(partition_index=partition, error_code=code))
    return WriteTxnMarkersResponse(markers=results)
