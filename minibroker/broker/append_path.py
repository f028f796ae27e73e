"""The leader's writes: Produce's append (Kafka's ReplicaManager.appendRecords) and its wait for
acks=all, the coordinators' batches, transaction markers, and DeleteRecords. Part of
ReplicaManager (broker/replica_state.py says how the parts fit)."""
from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterable, Sequence

from kafka.errors import (InvalidRecordError, InvalidTopicError, KafkaError,
                          NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                          OffsetOutOfRangeError, PolicyViolationError, RequestTimedOutError)

from minibroker.broker.partition import Partition
from minibroker.broker.replica_state import ReplicaState
from minibroker.log.adoption import adoption, frame_records
from minibroker.log.batch import build_control_batch
from minibroker.log.partition_log import AppendResult
from minibroker.protocol.fast import ProducePartition, ProduceTopic
from minibroker.protocol.produce_response import PartitionResult
from minibroker.protocol.topic_names import INTERNAL_TOPICS

_BATCH_LENGTH = struct.Struct(">i")
# acks=all: (the result, a future of its error code once the high watermark passed it, where)
ReplicationWait = tuple[PartitionResult, "asyncio.Future[int]", Partition]


def _time_out(futs: Iterable[asyncio.Future[int]]) -> None:
    for fut in futs:
        if not fut.done():
            fut.set_result(RequestTimedOutError.errno)


def _kip253_refusal(rm: ReplicaState, p: Partition, td: ProduceTopic, pd: ProducePartition
                    ) -> tuple[PartitionResult | None, AppendResult | None]:
    """KIP-253's checks of a produced batch: (the refusal, None), else (None, the batch this log
    already holds if it is a retry of one, else None)."""
    err = rm.check_partition_metadata(p, td.undeleted_partition_count, producing=True)
    if not err:
        return None, None
    # A retry of a batch this log already holds is answered with its offsets, whatever the count
    # now: else the client, told "stale", partitions its records again under sequence numbers the
    # log has, and a later batch with those numbers is taken for the duplicate and acknowledged
    # at wrong offsets.
    duplicate = p.log.duplicate_of(pd.records or b"")
    if duplicate is not None:
        return None, duplicate
    return PartitionResult(pd.index, err, error_message=(
        f"undeleted_partition_count {td.undeleted_partition_count} != "
        f"{p.undeleted_partition_count}, or the partition is marked for deletion")), None


class AppendPath(ReplicaState):

    # ------------------------------------------------------------------ Produce: the leader's append
    def append_records(self, topics: Sequence[ProduceTopic], acks: int,
                       internal_topics_allowed: bool = False
                       ) -> tuple[dict[str, list[PartitionResult]], list[ReplicationWait]]:
        """Append each partition's batch as leader (Kafka's ReplicaManager.appendRecords), for
        acks 0, 1 or -1. `topics` are protocol.fast's decoded Produce topics. Per partition:
        leadership and KIP-253 checks, min.insync.replicas, one batch only, the append, the high
        watermark, retention.bytes, the broker's log memory cap, and a wake-up of waiting fetches.
        Returns the per-topic PartitionResults and, for acks=-1, the (result, future, partition)
        of each batch the high watermark has yet to reach: `await_replication` waits for them.
        Internal topics are written by their coordinators only: a client's batch there is
        INVALID_TOPIC_EXCEPTION "Cannot append to internal topic" (Kafka lets client.id
        "__admin_client" through; no client gets through here)."""
        results: dict[str, list[PartitionResult]] = {}
        waits: list[ReplicationWait] = []
        # A large request's batches are kept where they arrived, not copied (protocol.framing).
        kept = frame_records(pd.records for td in topics for pd in td.partitions)
        for td in topics:
            out = results.setdefault(td.name, [])
            if td.name in INTERNAL_TOPICS and not internal_topics_allowed:
                out += [PartitionResult(pd.index, InvalidTopicError.errno, error_message=(
                    f"Cannot append to internal topic {td.name}")) for pd in td.partitions]
                continue
            for pd in td.partitions:
                p, err = self.leader_partition(td.name, pd.index)
                if p is None:
                    out.append(PartitionResult(pd.index, err))
                    continue
                duplicate: AppendResult | None = None
                # KIP-253's checks can only fail for a client that sends its partition count, or
                # on a partition marked for deletion (the call is skipped on the common path).
                if td.undeleted_partition_count >= 0 or p.leader_epoch_before_deletion:
                    refused, duplicate = _kip253_refusal(self, p, td, pd)
                    if refused is not None:
                        out.append(refused)
                        continue
                plog = p.log
                min_isr = plog.config.min_insync_replicas
                if acks == -1 and len(p.isr) < min_isr:
                    out.append(PartitionResult(pd.index, NotEnoughReplicasError.errno,
                                               error_message=f"ISR {list(p.isr)} is smaller than "
                                               f"min.insync.replicas={min_isr}"))
                    continue
                records = pd.records or b""
                if len(records) >= 12 and \
                        _BATCH_LENGTH.unpack_from(records, 8)[0] + 12 < len(records):
                    # Produce v3+: exactly one record batch per partition (Kafka's rule).
                    out.append(PartitionResult(
                        pd.index, InvalidRecordError.errno, error_message="Produce requests "
                        "carry exactly one record batch per partition"))
                    continue
                try:
                    res = duplicate or plog.append_as_leader(records, p.leader_epoch,
                                                             adopt=adoption(records, kept))
                except KafkaError as e:
                    out.append(PartitionResult(pd.index, e.errno, error_message=str(e),
                                               record_errors=getattr(e, "record_errors", None)))
                    continue
                p.maybe_increment_high_watermark()
                ts = self.stats.topics[td.name]
                ts.bytes_in += len(records)
                ts.messages_in += res.last_offset - res.base_offset + 1
                if plog.size_bytes > plog.config.retention_bytes >= 0:
                    # An in-memory log is bounded by retention.bytes now, not at the next periodic
                    # check (log.retention.check.interval.ms): memory freed here is reused by the
                    # next batches, which costs a tenth of touching fresh pages.
                    plog.apply_retention(0, p.high_watermark, size_only=True)
                self.log_memory.maybe_evict()
                p.notify_data()
                out.append(PartitionResult(pd.index, 0, res.base_offset, res.log_append_time_ms,
                                           plog.log_start_offset))
                if acks == -1 and p.high_watermark <= res.last_offset:
                    waits.append((out[-1], p.wait_for_high_watermark(res.last_offset + 1), p))
                elif acks == -1 and len(p.isr) < plog.config.min_insync_replicas:
                    out[-1].error_code = NotEnoughReplicasAfterAppendError.errno
        return results, waits

    @staticmethod
    async def await_replication(waits: list[ReplicationWait], timeout_ms: int) -> None:
        """acks=all: wait until the high watermark passes each batch of `waits` (append_records'),
        or `timeout_ms`; each result then carries its error (REQUEST_TIMED_OUT, NOT_LEADER...,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below min.insync.replicas)."""
        # Each future resolves to an error code (0: the high watermark reached the batch). They are
        # awaited directly, so the caller resumes in the loop pass after the HW moves; a timer
        # resolves the rest with REQUEST_TIMED_OUT at the deadline. A batch the HW already covers
        # (RF 1) got no future at all.
        pending = [w[1] for w in waits if not w[1].done()]
        if pending:
            timer = asyncio.get_running_loop().call_later(max(timeout_ms, 0) / 1000, _time_out,
                                                          pending)
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

    # ------------------------------------------------------------------ the group coordinator's log
    def append_coordinator_batch(self, topic: str, partition: int, leader_epoch: int,
                                 batch: bytes | bytearray, now_ms: int
                                 ) -> asyncio.Future[int]:
        """Append a coordinator's record batch as leader under `leader_epoch` (the caller checked
        it leads there); a future of 0 once the high watermark passed it. Raises KafkaError when
        the log refuses the batch."""
        p = self.partitions[(topic, partition)]
        res = p.log.append_as_leader(batch, leader_epoch, now_ms, origin="coordinator")
        p.maybe_increment_high_watermark()
        p.notify_data()
        return p.wait_for_high_watermark(res.last_offset + 1)

    def write_txn_marker(self, topic: str, partition: int, commit: bool, producer_id: int,
                         producer_epoch: int, coordinator_epoch: int, now_ms: int
                         ) -> asyncio.Future[int] | int:
        """WriteTxnMarkers on a partition we lead: append the control batch; a future of 0 once
        the high watermark passed it, else an error code now."""
        p, err = self.leader_partition(topic, partition)
        if p is None:
            return err
        batch = build_control_batch(commit, producer_id, producer_epoch,
                                    coordinator_epoch=coordinator_epoch, timestamp=now_ms)
        try:
            return self.append_coordinator_batch(topic, partition, p.leader_epoch, batch, now_ms)
        except KafkaError as e:
            return int(e.errno)

    def in_ongoing_txn(self, topic: str, partition: int, producer_id: int) -> bool:
        """We lead the partition and the producer's transaction is open there (KIP-890)."""
        p = self.partitions.get((topic, partition))
        return p is not None and p.is_leader and producer_id in p.log.producers.ongoing

    def delete_records(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords on the leader: move the log start offset up to `offset` (-1: the high
        watermark), never past the high watermark. Returns (low_watermark, error_code); followers
        follow through the log_start_offset of their fetch responses."""
        p, err = self.leader_partition(topic, partition)
        if p is None:
            return -1, err
        if not p.log.config.deletes:
            return -1, PolicyViolationError.errno
        if offset == -1:
            offset = p.high_watermark
        if offset < 0 or offset > p.high_watermark:
            return -1, OffsetOutOfRangeError.errno
        low_watermark = p.log.delete_records_before(offset)
        p.notify_data()
        return low_watermark, 0
