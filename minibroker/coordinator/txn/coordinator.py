"""The transaction coordinator of one broker (KIP-98; Kafka's TransactionCoordinator).

Transactional ids live in __transaction_state (partition abs(javaHashCode(id)) % partitions, as
Kafka), a compacted internal topic created through the controller on the first FindCoordinator.
This broker coordinates the ids whose partition it leads: it loads them by replaying the partition
when it becomes leader (state.replay; ids of a loading partition get
COORDINATOR_LOAD_IN_PROGRESS, others NOT_COORDINATOR). Every state change is a record written
with acks=all and applied (replay) once the high watermark passed it; while one is in flight the
id answers CONCURRENT_TRANSACTIONS.

The life of a transaction: InitProducerId (Empty, epoch bumped: the previous producer is fenced;
an Ongoing transaction is first aborted and the caller retries) -> AddPartitionsToTxn /
AddOffsetsToTxn (Ongoing) -> EndTxn (PrepareCommit/PrepareAbort written, the client answered)
-> WriteTxnMarkers to every partition leader over the wire (markers.py) -> CompleteCommit/
CompleteAbort. A loaded Prepare* state resumes its markers (the previous coordinator died), so a
decided transaction always completes. Transactions open longer than their timeout are aborted
with a bumped epoch (the producer is fenced), every
transaction.abort.timed.out.transaction.cleanup.interval.ms; ids idle past
transactional.id.expiration.ms are tombstoned.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Awaitable, Callable, Iterator

import kafka.errors as Errors
from kafka.record.default_records import DefaultRecordBatch

from minibroker.coordinator.shards import CreateTopics, ShardedCoordinator
from minibroker.coordinator.txn.records import (
    COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_ABORT, PREPARE_COMMIT, TxnRecord,
    encode_key, encode_value,
)
from minibroker.coordinator.txn.state import TxnMetadata, TxnShard, replay
from minibroker.log.batch import build_batch
from minibroker.log.config import VALIDATORS

if TYPE_CHECKING:
    from minibroker.metadata.cache import MetadataCache
    from minibroker.clock import Clock
    from minibroker.config import ClusterConfig
    from minibroker.coordinator.partition_writer import PartitionWriter

log = logging.getLogger("minibroker.txn")

TRANSACTION_STATE_TOPIC = "__transaction_state"
TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "uncompressed",
                 "segment.bytes": "104857600"}
MAX_EPOCH = 32767
WRITE_TIMEOUT_MS = 5000

# (broker id, [(producer_id, epoch, commit, coordinator_epoch, [(topic, partition)])]) ->
# {(producer_id, topic, partition): error code}
SendMarkers = Callable[[int, list], Awaitable[dict]]


class TransactionCoordinator(ShardedCoordinator[TxnShard]):
    topic = TRANSACTION_STATE_TOPIC
    log = log                   # its messages under minibroker.txn

    def __init__(self, node_id: int, config: "ClusterConfig", clock: "Clock",
                 metadata: "MetadataCache", writer: "PartitionWriter",
                 create_topics: CreateTopics, next_producer_id: Callable[[], Awaitable[int]],
                 send_markers: SendMarkers) -> None:
        super().__init__(node_id, config, clock, metadata, writer, create_topics)
        self.next_producer_id = next_producer_id
        self.send_markers = send_markers

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.running = True
        self._spawn(self._timeout_loop())

    # ------------------------------------------------------------------ the internal topic
    def _default_partitions(self) -> int:
        return self.config.transaction_state_log_num_partitions

    def _topic_spec(self, live_brokers: int) -> tuple[int, dict[str, str]]:
        rf = min(self.config.transaction_state_log_replication_factor, live_brokers)
        configs = {k: v for k, v in TOPIC_CONFIGS.items() if k in VALIDATORS}
        configs["min.insync.replicas"] = str(min(self.config.transaction_state_log_min_isr, rf))
        return rf, configs

    # ------------------------------------------------------------------ load
    def _new_shard(self, partition: int, leader_epoch: int) -> TxnShard:
        return TxnShard(partition, leader_epoch)

    def _replay_batch(self, shard: TxnShard, data: bytes) -> None:
        batch = DefaultRecordBatch(data)
        if batch.is_control_batch:
            return
        for record in batch:
            if record.key is not None:
                try:
                    replay(shard, record.key, record.value)
                except ValueError:
                    log.warning("%s-%d offset %d: undecodable record",
                                TRANSACTION_STATE_TOPIC, shard.partition, record.offset)

    def _on_loaded(self, shard: TxnShard) -> None:
        log.log(logging.INFO if shard.txns else logging.DEBUG, "broker %d: loaded %s-%d (%d ids)",
                self.node_id, TRANSACTION_STATE_TOPIC, shard.partition, len(shard.txns))
        for tid in sorted(shard.txns):
            txn = shard.txns[tid]
            if txn.preparing:           # decided under the previous coordinator: finish it
                self._spawn(self._complete(shard, txn))

    # ------------------------------------------------------------------ writes
    async def _write(self, shard: TxnShard, tid: str, r: TxnRecord) -> int:
        """Write one state record; applied once the high watermark passed it. Returns the error
        code the client gets (NOT_COORDINATOR when leadership moved meanwhile)."""
        txn = shard.txns.get(tid)
        if txn is not None:
            txn.pending = True
        try:
            if self.writer.leader_epoch(shard.partition) != shard.leader_epoch or \
                    not self.is_active(shard):
                return Errors.NotCoordinatorError.errno
            now = self.clock.now_ms()
            batch = build_batch([(encode_key(tid), encode_value(r), [])], timestamp=now)
            try:
                fut = self.writer.append(shard.partition, shard.leader_epoch, batch, now)
            except Errors.KafkaError as e:
                log.warning("broker %d: %s write of %r refused: %s", self.node_id,
                            TRANSACTION_STATE_TOPIC, tid, e)
                return Errors.NotCoordinatorError.errno
            try:
                code = await asyncio.wait_for(asyncio.shield(fut), WRITE_TIMEOUT_MS / 1000)
            except asyncio.TimeoutError:
                return Errors.CoordinatorNotAvailableError.errno
            except asyncio.CancelledError:
                if fut.cancelled():
                    return Errors.NotCoordinatorError.errno
                raise
            if code:
                return Errors.NotCoordinatorError.errno if code in (
                    Errors.NotLeaderForPartitionError.errno,
                    Errors.UnknownTopicOrPartitionError.errno) else \
                    Errors.CoordinatorNotAvailableError.errno
            if not self.is_active(shard):
                return Errors.NotCoordinatorError.errno
            replay(shard, encode_key(tid), encode_value(r))
            return 0
        finally:
            current = shard.txns.get(tid)
            if current is not None:
                current.pending = False

    # ------------------------------------------------------------------ InitProducerId
    async def init_producer_id(self, tid: str, timeout_ms: int, producer_id: int = -1,
                               producer_epoch: int = -1, fenced_code: int = 0
                               ) -> tuple[int, int, int]:
        """(error, producer id, epoch). `fenced_code`: PRODUCER_FENCED or, for old versions,
        INVALID_PRODUCER_EPOCH."""
        fenced_code = fenced_code or Errors.ProducerFencedError.errno
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return Errors.InvalidTransactionTimeoutError.errno, -1, -1
        shard, err = self.shard_for(tid)
        if err:
            return err, -1, -1
        now = self.clock.now_ms()
        txn = shard.txns.get(tid)
        if txn is None:
            new_pid = await self.next_producer_id()
            if shard.txns.get(tid) is not None:
                return Errors.ConcurrentTransactionsError.errno, -1, -1
            code = await self._write(shard, tid, TxnRecord(new_pid, 0, timeout_ms, EMPTY, (), now, -1))
            return (code, -1, -1) if code else (0, new_pid, 0)
        if txn.pending or txn.preparing:
            return Errors.ConcurrentTransactionsError.errno, -1, -1
        if producer_id >= 0:                # KIP-360: a producer recovering its own id
            if (producer_id, producer_epoch) == (txn.last_producer_id, txn.last_producer_epoch) \
                    and txn.completed:
                return 0, txn.producer_id, txn.producer_epoch       # a retry after our bump
            if (producer_id, producer_epoch) != (txn.producer_id, txn.producer_epoch):
                return fenced_code, -1, -1
        if txn.ongoing:
            # Fence the producer and abort what it left open; the caller retries.
            self._spawn(self._abort(shard, txn, bump=True, why="a new producer initialised"))
            return Errors.ConcurrentTransactionsError.errno, -1, -1
        pid, epoch = txn.producer_id, txn.producer_epoch + 1
        if epoch >= MAX_EPOCH:
            pid, epoch = await self.next_producer_id(), 0
        code = await self._write(shard, tid, TxnRecord(pid, epoch, timeout_ms, EMPTY, (), now, -1))
        return (code, -1, -1) if code else (0, pid, epoch)

    # ------------------------------------------------------------------ checks
    def _check(self, tid: str, producer_id: int, producer_epoch: int, fenced_code: int
               ) -> tuple[TxnShard | None, TxnMetadata | None, int]:
        shard, err = self.shard_for(tid)
        if err:
            return None, None, err
        txn = shard.txns.get(tid)
        if txn is None or txn.producer_id != producer_id:
            return None, None, Errors.InvalidProducerIdMappingError.errno
        if txn.producer_epoch != producer_epoch:
            return None, None, fenced_code or Errors.ProducerFencedError.errno
        if txn.pending or txn.preparing:
            return None, None, Errors.ConcurrentTransactionsError.errno
        return shard, txn, 0

    # ------------------------------------------------------------------ AddPartitionsToTxn
    async def add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                             partitions: list[tuple[str, int]], fenced_code: int = 0,
                             verify_only: bool = False) -> dict[tuple[str, int], int]:
        shard, txn, err = self._check(tid, producer_id, producer_epoch, fenced_code)
        if err:
            return {tp: err for tp in partitions}
        if verify_only:         # KIP-890: a partition leader asks before a transactional append
            return {tp: 0 if txn.ongoing and tp in txn.partitions
                    else Errors.InvalidTxnStateError.errno for tp in partitions}
        unknown = [tp for tp in partitions if self.metadata.partition(*tp) is None]
        if unknown:
            return {tp: Errors.UnknownTopicOrPartitionError.errno if tp in unknown
                    else Errors.OperationNotAttemptedError.errno for tp in partitions}
        if txn.ongoing and all(tp in txn.partitions for tp in partitions):
            return {tp: 0 for tp in partitions}
        now = self.clock.now_ms()
        r = txn.record(state=ONGOING, partitions=tuple(sorted(txn.partitions | set(partitions))),
                       last_update_ms=now, start_ms=txn.start_ms if txn.ongoing else now)
        code = await self._write(shard, tid, r)
        return {tp: code for tp in partitions}

    # ------------------------------------------------------------------ EndTxn
    async def end_txn(self, tid: str, producer_id: int, producer_epoch: int, commit: bool,
                      fenced_code: int = 0) -> int:
        shard, err = self.shard_for(tid)
        if err:
            return err
        txn = shard.txns.get(tid)
        if txn is not None and txn.producer_id == producer_id and \
                txn.producer_epoch == producer_epoch and not txn.pending:
            # A retried EndTxn whose first try was applied answers as that one did.
            if txn.state == (COMPLETE_COMMIT if commit else COMPLETE_ABORT):
                return 0
            if txn.state == (PREPARE_COMMIT if commit else PREPARE_ABORT):
                return Errors.ConcurrentTransactionsError.errno
        shard, txn, err = self._check(tid, producer_id, producer_epoch, fenced_code)
        if err:
            return err
        if not txn.ongoing:
            return Errors.InvalidTxnStateError.errno
        now = self.clock.now_ms()
        code = await self._write(shard, tid, txn.record(
            state=PREPARE_COMMIT if commit else PREPARE_ABORT, last_update_ms=now))
        if not code:
            self._spawn(self._complete(shard, txn))
        return code

    async def _abort(self, shard: TxnShard, txn: TxnMetadata, *, bump: bool, why: str) -> None:
        """Abort an Ongoing transaction, with a bumped epoch when the producer is to be fenced."""
        if txn.pending or not txn.ongoing:
            return
        epoch = txn.producer_epoch + 1 if bump and txn.producer_epoch + 1 < MAX_EPOCH \
            else txn.producer_epoch
        log.info("broker %d: aborting transaction of %r (producer %d, epoch %d -> %d): %s",
                 self.node_id, txn.transactional_id, txn.producer_id, txn.producer_epoch, epoch, why)
        code = await self._write(shard, txn.transactional_id, txn.record(
            state=PREPARE_ABORT, producer_epoch=epoch, last_update_ms=self.clock.now_ms()))
        if not code:
            await self._complete(shard, txn)

    async def _complete(self, shard: TxnShard, txn: TxnMetadata) -> None:
        """Write the markers of a Prepare* transaction to every partition, then Complete*."""
        commit = txn.state == PREPARE_COMMIT
        pending = set(txn.partitions)
        backoff = 0.02
        while pending and self.is_active(shard) and shard.txns.get(txn.transactional_id) is txn:
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for tp in sorted(pending):
                p = self.metadata.partition(*tp)
                if p is None:
                    pending.discard(tp)             # deleted: nothing to mark
                elif p.leader >= 0:
                    by_leader.setdefault(p.leader, []).append(tp)
            results = await asyncio.gather(*(
                self._send(leader, txn.producer_id, txn.producer_epoch, commit, shard.leader_epoch, tps)
                for leader, tps in sorted(by_leader.items())))
            for codes in results:
                for tp, code in codes.items():
                    if code == 0 or not _retriable(code):
                        if code:
                            log.warning("broker %d: marker for %r on %s-%d failed: %s", self.node_id,
                                        txn.transactional_id, tp[0], tp[1], Errors.for_code(code).__name__)
                        pending.discard(tp)
            if pending:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 0.5)
        # The Complete* record is retried until it is written, as Kafka's
        # TransactionMarkerChannelManager retries its append: a write that timed out
        # (COORDINATOR_NOT_AVAILABLE: the high watermark was slow, under load or while an ISR
        # settles) left the id in Prepare*, answering CONCURRENT_TRANSACTIONS until the next
        # coordinator took over (issue 42: ~30 s in the exactly-once conformance test).
        while not pending and self.is_active(shard) and \
                shard.txns.get(txn.transactional_id) is txn and txn.preparing:
            code = await self._write(shard, txn.transactional_id, txn.record(
                state=COMPLETE_COMMIT if commit else COMPLETE_ABORT, partitions=(),
                last_update_ms=self.clock.now_ms()))
            if code != Errors.CoordinatorNotAvailableError.errno:
                return                      # written, or not the coordinator any more
            log.info("broker %d: completing the transaction of %r: the write timed out; "
                     "retrying", self.node_id, txn.transactional_id)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 0.5)

    async def _send(self, leader: int, producer_id: int, epoch: int, commit: bool,
                    coordinator_epoch: int, tps: list[tuple[str, int]]) -> dict:
        try:
            got = await self.send_markers(leader, [(producer_id, epoch, commit, coordinator_epoch, tps)])
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 — the broker is down: retried
            log.debug("broker %d: WriteTxnMarkers to %d failed: %r", self.node_id, leader, e)
            return {tp: Errors.NotLeaderForPartitionError.errno for tp in tps}
        return {tp: got.get((producer_id, tp[0], tp[1]), Errors.UnknownError.errno)
                for tp in tps}

    # ------------------------------------------------------------------ timeouts, expiration
    async def _timeout_loop(self) -> None:
        interval = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.abort_timed_out()
                self.expire_ids()
            except Exception:  # noqa: BLE001
                log.exception("transaction timeout check failed")

    def _loaded(self) -> Iterator[tuple[TxnShard, TxnMetadata]]:
        """Every id of the loaded partitions, in partition then id order."""
        for pid in sorted(self.shards):
            shard = self.shards[pid]
            if not shard.loading:
                for tid in sorted(shard.txns):
                    yield shard, shard.txns[tid]

    def abort_timed_out(self) -> None:
        now = self.clock.now_ms()
        for shard, txn in self._loaded():
            if txn.ongoing and not txn.pending and now > txn.start_ms + txn.timeout_ms:
                self._spawn(self._abort(shard, txn, bump=True,
                                        why=f"timed out after {txn.timeout_ms} ms"))

    def expire_ids(self) -> None:
        now = self.clock.now_ms()
        expiration = self.config.transactional_id_expiration_ms
        for shard, txn in self._loaded():
            if txn.completed and not txn.pending and now - txn.last_update_ms > expiration:
                self._spawn(self._tombstone(shard, txn.transactional_id))

    async def _tombstone(self, shard: TxnShard, tid: str) -> None:
        if self.writer.leader_epoch(shard.partition) != shard.leader_epoch:
            return
        now = self.clock.now_ms()
        batch = build_batch([(encode_key(tid), None, [])], timestamp=now)
        try:
            code = await self.writer.append(shard.partition, shard.leader_epoch, batch, now)
        except Errors.KafkaError:
            return
        if not code and self.is_active(shard):
            replay(shard, encode_key(tid), None)

    # ------------------------------------------------------------------ describe / list
    def describe(self, tid: str) -> tuple[int, TxnMetadata | None]:
        shard, err = self.shard_for(tid)
        if err:
            return err, None
        txn = shard.txns.get(tid)
        return (0, txn) if txn is not None else (Errors.TransactionalIdNotFoundError.errno, None)

    def list_transactions(self) -> list[TxnMetadata]:
        return [txn for _, txn in self._loaded()]


def _retriable(code: int) -> bool:
    return code in (Errors.NotLeaderForPartitionError.errno, Errors.UnknownTopicOrPartitionError.errno,
                    Errors.NotEnoughReplicasError.errno, Errors.NotEnoughReplicasAfterAppendError.errno,
                    Errors.RequestTimedOutError.errno, Errors.KafkaStorageError.errno,
                    Errors.UnknownError.errno)
