"""Produce (key 0), v3-12.

v3: transactional_id, magic 2 only.  v5: log_start_offset.  v8: record_errors, error_message.
v9: flexible.  v10-12: current_leader / node_endpoints tags (not filled).
acks: 0 (no response), 1 (leader append), -1 (wait for the high watermark; min.insync.replicas).
Not implemented: transactional produce (answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
KIP-253: a topic's undeleted_partition_count (tag 10000, v9+) must match the leader's, else
INVALID_PARTITION_METADATA per partition; writes into partitions marked for deletion are refused.
Hot path: the body is decoded by minibroker.protocol.fast (records stay memoryviews of the frame).
"""
from __future__ import annotations

import asyncio
import struct

from kafka.errors import (InvalidRecordError, InvalidRequiredAcksError, KafkaError,
                          NotEnoughReplicasAfterAppendError,
                          NotEnoughReplicasError, RequestTimedOutError,
                          TransactionalIdAuthorizationFailedError)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import ProduceRequest

from minibroker.broker.dispatch import RawResponse, RequestContext, handles
from minibroker.protocol.fast import decode_produce
from minibroker.protocol.framing import handed_over
from minibroker.protocol.produce_response import PartitionResult as _part
from minibroker.protocol.produce_response import encode_produce_response

_BATCH_LENGTH = struct.Struct(">i")


def _time_out(futs) -> None:
    for fut in futs:
        if not fut.done():
            fut.set_result(RequestTimedOutError.errno)


@handles(ApiKey.Produce, ProduceRequest, versions=(3, 12), raw=True)
async def handle_produce(ctx: RequestContext, body: memoryview):
    req = decode_produce(body, ctx.api_version)
    broker = ctx.broker
    rm = broker.replica_manager
    faults = broker.faults
    acks = req.acks
    results: dict[str, list] = {}
    waits = []          # (partition result index, topic name, future, partition)
    for td in req.topics:
        out = results.setdefault(td.name, [])
        for pd in td.partitions:
            if acks not in (0, 1, -1):
                out.append(_part(pd.index, InvalidRequiredAcksError.errno))
                continue
            if req.transactional_id is not None:
                out.append(_part(pd.index, TransactionalIdAuthorizationFailedError.errno))
                continue
            injected = faults.pop_request_error(ApiKey.Produce) if faults.errors_queued else 0
            if injected:
                out.append(_part(pd.index, injected))
                continue
            p, err = rm.leader_partition(td.name, pd.index)
            if err:
                out.append(_part(pd.index, err))
                continue
            # KIP-253's checks can only fail for a client that sends its partition count, or on a
            # partition marked for deletion (the call is skipped on the common path).
            if td.undeleted_partition_count >= 0 or p.leader_epoch_before_deletion:
                err = rm.check_partition_metadata(p, td.undeleted_partition_count, producing=True)
            if err:
                out.append(_part(pd.index, err, error_message=(
                    f"undeleted_partition_count {td.undeleted_partition_count} != "
                    f"{p.undeleted_partition_count}, or the partition is marked for deletion")))
                continue
            min_isr = p.log.config.min_insync_replicas
            if acks == -1 and len(p.isr) < min_isr:
                out.append(_part(pd.index, NotEnoughReplicasError.errno,
                                 error_message=f"ISR {list(p.isr)} is smaller than "
                                         f"min.insync.replicas={min_isr}"))
                continue
            records = pd.records or b""
            if len(records) >= 12 and _BATCH_LENGTH.unpack_from(records, 8)[0] + 12 < len(records):
                # Produce v3+: exactly one record batch per partition (Kafka's rule).
                out.append(_part(pd.index, InvalidRecordError.errno,
                                 error_message="Produce requests carry exactly one record batch "
                                         "per partition"))
                continue
            try:
                # A large request's batches are kept where they arrived (handed_over), not copied.
                res = p.log.append_as_leader(records, p.leader_epoch, adopt=handed_over(records))
            except KafkaError as e:
                out.append(_part(pd.index, e.errno, error_message=str(e)))
                continue
            p.maybe_increment_high_watermark()
            ts = broker.stats.topics[td.name]
            ts.bytes_in += len(records)
            ts.messages_in += res.last_offset - res.base_offset + 1
            if p.log.size_bytes > p.log.config.retention_bytes >= 0:
                # An in-memory log is bounded by retention.bytes now, not at the next periodic check
                # (log.retention.check.interval.ms): memory freed here is reused by the next batches,
                # which costs a tenth of touching fresh pages.
                p.log.apply_retention(0, p.high_watermark, size_only=True)
            rm.log_memory.maybe_evict()
            p.notify_data()
            out.append(_part(pd.index, 0, res.base_offset, res.log_append_time_ms,
                             p.log.log_start_offset))
            if acks == -1 and p.high_watermark <= res.last_offset:
                waits.append((out[-1], p.wait_for_high_watermark(res.last_offset + 1), p))
            elif acks == -1 and len(p.isr) < p.log.config.min_insync_replicas:
                out[-1].error_code = NotEnoughReplicasAfterAppendError.errno
    if acks == 0:
        return None
    if waits:
        # Each future resolves to an error code (0: the high watermark reached the batch). They are
        # awaited directly, so the handler resumes in the loop pass after the HW moves; a timer
        # resolves the rest with REQUEST_TIMED_OUT at the deadline. A batch the HW already covers
        # (RF 1) got no future at all.
        pending = [w[1] for w in waits if not w[1].done()]
        if pending:
            loop = asyncio.get_running_loop()
            timer = loop.call_later(max(req.timeout_ms, 0) / 1000, _time_out, pending)
            # The log holds its own copy (or the large frame's own buffer) now: let go of the
            # request frame while waiting, so the network layer can reuse a shared receive buffer.
            del body, req, td, pd, records
            ctx.frame = None
            try:
                for fut in pending:
                    if not fut.done():
                        await fut
            finally:
                timer.cancel()
        for part, fut, p in waits:
            if fut.result():
                part.error_code = fut.result()
                part.base_offset = -1
            elif len(p.isr) < p.log.config.min_insync_replicas:
                part.error_code = NotEnoughReplicasAfterAppendError.errno
    return RawResponse(encode_produce_response(ctx.api_version, ctx.header.correlation_id, results))
