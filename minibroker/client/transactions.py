"""The reference producer's transactions (Kafka's TransactionManager, in asyncio).

    producer = Producer(bs, transactional_id="tx-1")
    await producer.start(); await producer.init_transactions()
    producer.begin_transaction()
    producer.send("out", b"v")
    await producer.send_offsets_to_transaction({tp: offset}, consumer.group_metadata())
    await producer.commit_transaction()          # or abort_transaction()

The coordinator is found with FindCoordinator key_type 1; InitProducerId with the transactional id
bumps the epoch (fencing older producers).  A partition joins the transaction (AddPartitionsToTxn)
before its first Produce: the producer's sender holds its batches until `ready(tp)` says so.
COORDINATOR_LOAD_IN_PROGRESS / CONCURRENT_TRANSACTIONS / NOT_COORDINATOR are retried; PRODUCER_FENCED,
INVALID_PRODUCER_EPOCH and TRANSACTION_COORDINATOR_FENCED are fatal: every later call raises
ProducerFencedError, as Kafka's clients do.  A failed send makes the transaction abortable only.
"""
from __future__ import annotations

import asyncio
import logging

import kafka.errors as Errors
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest,
                                     EndTxnRequest, InitProducerIdRequest, TxnOffsetCommitRequest)

from minibroker.client.connection_pool import ConnectionPool
from minibroker.client.records import ConsumerGroupMetadata, TopicPartition

log = logging.getLogger("minibroker.client.transactions")

TXN_NODE_BASE = 1 << 29           # coordinator connections are separate from the leaders'
FENCED_CODES = {Errors.ProducerFencedError.errno, Errors.InvalidProducerEpochError.errno,
                Errors.TransactionCoordinatorFencedError.errno}
_COORDINATOR_CODES = {Errors.NotCoordinatorError.errno, Errors.CoordinatorNotAvailableError.errno}
_RETRY_CODES = {Errors.CoordinatorLoadInProgressError.errno,
                Errors.ConcurrentTransactionsError.errno} | _COORDINATOR_CODES
_KEY_GROUP, _KEY_TXN = 0, 1


def _codes(topics) -> list[int]:
    return [p.partition_error_code if hasattr(p, "partition_error_code") else p.error_code
            for t in topics for p in getattr(t, "results_by_partition", None) or t.partitions]


class TransactionManager:
    def __init__(self, pool: ConnectionPool, transactional_id: str, timeout_ms: int,
                 retry_backoff: float, on_ready) -> None:
        self.pool = pool
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.retry_backoff = retry_backoff
        self.on_ready = on_ready            # wakes the producer's sender when partitions joined
        self.producer_id = -1
        self.producer_epoch = -1
        self.in_transaction = False
        self.fatal: Exception | None = None
        self.abortable: Exception | None = None
        self.add_error: Exception | None = None     # AddPartitionsToTxn failed: sends fail
        self._nodes: dict[tuple[int, str], int] = {}
        self._added: set[TopicPartition] = set()
        self._pending: set[TopicPartition] = set()
        self._adding: asyncio.Task | None = None
        self._offsets = False

    # ------------------------------------------------------------------ state checks
    def check(self, need_txn: bool = True) -> None:
        if self.fatal is not None:
            raise self.fatal
        if self.producer_id < 0:
            raise Errors.IllegalStateError("init_transactions() first")
        if need_txn and not self.in_transaction:
            raise Errors.IllegalStateError("no transaction in progress")

    def failed(self, exc: Exception) -> None:
        """A send of the transaction failed: fenced is fatal, anything else only abortable."""
        if getattr(exc, "errno", None) in FENCED_CODES:
            self.fatal = Errors.ProducerFencedError(
                f"transactional id {self.transactional_id}: {exc!r}")
        elif self.abortable is None:
            self.abortable = exc

    def ready(self, tp: TopicPartition) -> bool:
        """True once `tp` is in the transaction; else it is added in the background."""
        if tp in self._added:
            return True
        if self.add_error is not None:
            return False
        if tp not in self._pending:
            self._pending.add(tp)
            if self._adding is None or self._adding.done():
                self._adding = asyncio.get_running_loop().create_task(self._add_partitions())
        return False

    # ------------------------------------------------------------------ requests
    async def _coordinator(self, key_type: int, key: str) -> int:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.pool.request_timeout
        while (key_type, key) not in self._nodes:
            try:
                _, conn = await self.pool.any_connection()
                version = self.pool.version(conn, FindCoordinatorRequest, hi=6)
                batched = version >= 4
                req = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]) \
                    if batched else FindCoordinatorRequest(key=key, key_type=key_type)
                resp = await conn.request(req, version, timeout=self.pool.request_timeout)
                c = resp.coordinators[0] if batched else resp
                if c.error_code == 0:
                    node = TXN_NODE_BASE + c.node_id
                    self.pool.update_addresses({node: (c.host, c.port)})
                    self._nodes[(key_type, key)] = node
                    break
                if not Errors.for_code(c.error_code).retriable and \
                        c.error_code not in _RETRY_CODES:
                    raise Errors.for_code(c.error_code)(f"FindCoordinator {key}")
            except (ConnectionError, asyncio.TimeoutError, Errors.KafkaConnectionError,
                    Errors.NodeNotReadyError) as e:
                log.debug("FindCoordinator %s: %r", key, e)
            if loop.time() > end:
                raise Errors.CoordinatorNotAvailableError(f"no coordinator for {key}")
            await asyncio.sleep(self.retry_backoff)
        return self._nodes[(key_type, key)]

    async def _call(self, req, key_type: int = _KEY_TXN, key: str | None = None,
                    hi: int | None = None, codes=lambda r: [r.error_code]):
        """Send `req` to the coordinator until no retriable error is left; fenced is fatal."""
        key = key or self.transactional_id
        loop = asyncio.get_running_loop()
        end = loop.time() + self.pool.request_timeout
        while True:
            node = await self._coordinator(key_type, key)
            try:
                resp = await self.pool.request(node, req, hi=hi)
                errs = [c for c in codes(resp) if c]
            except (ConnectionError, asyncio.TimeoutError, Errors.KafkaConnectionError) as e:
                errs = [Errors.NetworkExceptionError.errno]
                log.debug("%s: %r", type(req).__name__, e)
            if not errs:
                return resp
            code = errs[0]
            if code in FENCED_CODES:
                self.failed(Errors.for_code(code)(type(req).__name__))
                raise self.fatal
            if code not in _RETRY_CODES and code != Errors.NetworkExceptionError.errno:
                raise Errors.for_code(code)(type(req).__name__)
            if code in _COORDINATOR_CODES or code == Errors.NetworkExceptionError.errno:
                self.pool.close_node(self._nodes.pop((key_type, key), node), "coordinator moved")
            if loop.time() > end:
                raise Errors.KafkaTimeoutError(f"{type(req).__name__}: error {code}")
            await asyncio.sleep(self.retry_backoff)

    async def init(self) -> None:
        if self.fatal is not None:
            raise self.fatal
        resp = await self._call(InitProducerIdRequest(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.timeout_ms,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch))
        self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch

    async def _add_partitions(self) -> None:
        while self._pending:
            tps = sorted(self._pending)
            by_topic: dict[str, list[int]] = {}
            for tp in tps:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            cls = AddPartitionsToTxnRequest
            req = cls(v3_and_below_transactional_id=self.transactional_id,
                      v3_and_below_producer_id=self.producer_id,
                      v3_and_below_producer_epoch=self.producer_epoch,
                      v3_and_below_topics=[cls.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                           for t, ps in by_topic.items()])
            try:
                await self._call(req, hi=3, codes=lambda r: _codes(r.results_by_topic_v3_and_below))
            except Exception as e:  # noqa: BLE001 - fails the transaction's sends, not the loop
                self.failed(e)
                self.add_error = self.fatal or e
                self._pending.clear()
                self.on_ready()
                return
            self._added.update(tps)
            self._pending.difference_update(tps)
            self.on_ready()

    async def send_offsets(self, offsets: dict, group: ConsumerGroupMetadata) -> None:
        self.check()
        await self._call(AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, group_id=group.group_id))
        self._offsets = True
        by_topic: dict[str, list] = {}
        cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp[0], []).append(cls.TxnOffsetCommitRequestPartition(
                partition_index=tp[1], committed_offset=int(offset), committed_leader_epoch=-1,
                committed_metadata=""))
        # KIP-447: the group's generation and member let the coordinator fence zombies.
        await self._call(TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group.group_id,
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            generation_id=group.generation_id, member_id=group.member_id,
            group_instance_id=group.group_instance_id,
            topics=[cls(name=t, partitions=ps) for t, ps in by_topic.items()]),
            key_type=_KEY_GROUP, key=group.group_id,
            codes=lambda r: [p.error_code for t in r.topics for p in t.partitions])

    async def end(self, commit: bool) -> None:
        self.check()
        if commit and self.abortable is not None:
            raise Errors.KafkaError(f"the transaction must be aborted: {self.abortable!r}")
        if self._added or self._offsets:        # Kafka sends no EndTxn for an empty transaction
            await self._call(EndTxnRequest(
                transactional_id=self.transactional_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, committed=commit))
        self.in_transaction = False
        self.abortable = self.add_error = None
        self._offsets = False
        self._added.clear()
