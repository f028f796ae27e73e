"""The pipelined asynchronous producer (the 0.9 client-rewrite proposal's design, in asyncio).

    producer = Producer("127.0.0.1:9092", acks=-1, linger_ms=5)
    await producer.start()
    fut = producer.send("topic", b"value", key=b"k")      # returns at once
    md = await fut                                          # RecordMetadata(topic, partition, offset, timestamp)
    await producer.stop()

How it works:
- `send` partitions the record at once when the topic's metadata is known, else parks it in the
  topic's "undesignated" queue and asks for metadata in the background (the proposal's
  "<topic>-1 queue"); the client never waits for metadata.
- One accumulator per partition: a deque of batches, each closed at `batch_size` bytes; a batch is
  ready when full, when `linger_ms` has passed, when more batches queue behind it, or on flush.
- One sender task for all brokers.  Ready batches are grouped by their partition's leader; each
  broker gets Produce requests (one batch per partition) while it has fewer than `max_in_flight`
  outstanding on its single pipelined connection, so all brokers are written to at once.
- Ordering per partition.  With idempotence (default) the producer gets a producer id
  (InitProducerId) and numbers each partition's batches; the broker rejects a batch whose
  predecessor is missing (OUT_OF_ORDER_SEQUENCE_NUMBER), so after an error the failed batch and
  every batch sent after it come back, are put back in sequence order, and the partition is held
  until nothing of it is in flight; then they go again in order.  Without idempotence a partition
  that needed a retry is limited to one batch in flight.
- Retriable errors (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
  NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, lost connections, ...) mark only that topic's metadata
  stale and back off only that partition; other partitions keep flowing.  A batch fails after
  `retries` retries or `delivery_timeout_ms` after it was created.
- Partitioning: `partitioner(topic, key, topic_metadata) -> partition` if given; otherwise
  KIP-253 linear hashing over N = initial and U = undeleted partition count for keys (equal to
  Kafka's default `(murmur2(key) & 0x7fffffff) % count` while U == N, and the default itself for
  brokers that report no counts), and a sticky partition among the U undeleted ones for unkeyed
  records (kept until its batch is sent, then the next one round-robin).
- KIP-253 (part 5).  Every batch remembers the U it was partitioned with and Produce carries it per
  topic.  When the topic's metadata shows another U (after INVALID_PARTITION_METADATA, which is
  retriable and refreshes metadata, or any refresh), a partition's batches with the old U are
  taken apart once nothing of that partition is in flight and their records partitioned again, in
  their order (idempotent: the partition's sequence goes back to the first unacknowledged batch).
  A batch sent without a conclusive answer (a timeout, a lost connection) may be in the log, so it
  is first sent again unchanged: the leader answers a batch it holds with its offsets, whatever
  the count, and refuses one it does not hold as stale; only then are its records moved.
  A key never has records in two partitions at once: a record whose key still has unacknowledged
  records in another partition is held, with every later record of that key, until those are
  resolved; so a key that moves keeps its order.
- KIP-253 part 9.  For a keyed record to a log-compacted topic going to a partition P1 >= N while
  N < U, the producer looks up (in the background, cached for `tombstone_check_interval_ms`) the
  parent P2's lowerOffsetThreshold (leaderEpochAfterCreation[P2] of P1 through
  OffsetForLeaderEpoch) and P2's earliest offset; when the earliest offset is past the threshold
  it also sends (key, null) to P2 with acks=0.

Transactions (`transactional_id`): init_transactions / begin_transaction / send_offsets_to_transaction /
commit_transaction / abort_transaction, in minibroker.client.transactions; the sender holds a
partition's batches until it has joined the transaction.

Not implemented: resetting the producer id after a fatal (non-retriable) error in
idempotent mode (the partition's later batches then keep failing with OUT_OF_ORDER_SEQUENCE).
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import random
from dataclasses import dataclass, field
from typing import Any, Callable

import kafka.errors as Errors
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest, ProduceResponse

from minibroker.client.connection_pool import ConnectionPool
from kafka.protocol.admin import DescribeConfigsRequest

from minibroker.client.kip253 import (epoch_end_offset, kip253_counts, linear_hashing_partitioner,
                                      partition_leader_epochs)
from minibroker.client.lifecycle import cancel_and_wait
from minibroker.client.list_offsets import EARLIEST, list_offsets
from minibroker.client.metadata import ClusterMetadata, TopicMetadata
from minibroker.client.records import (ConsumerGroupMetadata, RecordMetadata, TopicPartition,
                                       codec_id, encode_batch, estimate_size, mark_transactional)
from minibroker.client.security import ClientSecurity
from minibroker.client.transactions import TransactionManager
from minibroker.clock import Clock
from minibroker.network.sasl_client import AuthenticationFailed
from minibroker.partitioning import parent as partition_parent
from minibroker.protocol.errors import INVALID_PARTITION_METADATA, for_code
from minibroker.protocol.messages import ProduceRequestKip253

log = logging.getLogger("minibroker.client.producer")

Partitioner = Callable[[str, "bytes | None", TopicMetadata], int]

# Errors after which the partition's leader may have moved: refresh metadata before the retry.
_METADATA_ERRORS = (Errors.NotLeaderForPartitionError, Errors.LeaderNotAvailableError,
                    Errors.UnknownTopicOrPartitionError, Errors.FencedLeaderEpochError,
                    Errors.KafkaConnectionError, Errors.NotControllerError)
_RETRIABLE_CODES = {
    Errors.NotLeaderForPartitionError.errno, Errors.LeaderNotAvailableError.errno,
    Errors.UnknownTopicOrPartitionError.errno, Errors.NotEnoughReplicasError.errno,
    Errors.NotEnoughReplicasAfterAppendError.errno, Errors.RequestTimedOutError.errno,
    Errors.FencedLeaderEpochError.errno, Errors.KafkaStorageError.errno,
    Errors.OutOfOrderSequenceNumberError.errno, Errors.CorruptRecordError.errno,
    Errors.NetworkExceptionError.errno, Errors.UnknownLeaderEpochError.errno,
}


@dataclass(eq=False)
class _Batch:
    tp: TopicPartition
    created: float                      # loop time
    records: list = field(default_factory=list)     # (key, value, headers, timestamp)
    futures: list = field(default_factory=list)
    size: int = 61
    closed: bool = False                # no more appends (full, or sealed for sending)
    encoded: bytes | None = None        # fixed once sealed, so a retry resends the same bytes
    base_sequence: int = -1
    attempts: int = 0
    retry: bool = False
    sent: bool = False                  # sent at least once: the log may hold it
    unwritten: bool = False             # refused as stale (KIP-253): the log does not hold it
    count: int = -1                     # KIP-253: the undeleted partition count it was partitioned with
    pinned: list = field(default_factory=list)      # per record: partition given by the caller
    build: Callable | None = None       # send_batch: (producer id, epoch, base sequence) -> bytes
    n: int = 0                          # send_batch: its record count


class StalePartitioningError(Errors.KafkaError):
    """A send_batch batch was partitioned with an undeleted partition count that changed."""
    retriable = True


class _PartitionState:
    __slots__ = ("batches", "inflight", "backoff_until", "hold", "retried", "next_sequence")

    def __init__(self) -> None:
        self.batches: collections.deque[_Batch] = collections.deque()
        self.inflight = 0
        self.backoff_until = 0.0
        self.hold = False           # a retry waits for the partition's in-flight batches
        self.retried = False        # without idempotence: one in flight from now on
        self.next_sequence = 0


class Producer:
    def __init__(self, bootstrap_servers: str | list[str], *, acks: int | str = -1,
                 linger_ms: float = 5, batch_size: int = 16384, max_in_flight: int = 5,
                 compression: str | None = None, enable_idempotence: bool = True,
                 partitioner: Partitioner | None = None, client_id: str = "minibroker-producer",
                 retries: int = 2**31 - 1, retry_backoff_ms: int = 100,
                 delivery_timeout_ms: int = 120000, request_timeout_ms: int = 30000,
                 metadata_timeout_ms: int = 60000, clock: Clock | None = None,
                 tombstone_check_interval_ms: int = 1000, transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60000, ssl_context: Any = None,
                 security: ClientSecurity | None = None,
                 rng: random.Random | None = None) -> None:
        acks = -1 if acks == "all" else int(acks)
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1/'all', 0 or 1, not {acks}")
        if transactional_id is not None and not enable_idempotence:
            raise ValueError("a transactional producer is idempotent")
        if enable_idempotence and acks != -1:
            raise ValueError("enable_idempotence needs acks=-1 ('all')")
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be >= 1")
        self.acks = acks
        self.linger = linger_ms / 1000
        self.batch_size = batch_size
        self.max_in_flight = max_in_flight
        self.compression = codec_id(compression)
        self.idempotent = enable_idempotence
        self.partitioner = partitioner
        self.retries = retries
        self.retry_backoff = retry_backoff_ms / 1000
        self.delivery_timeout = delivery_timeout_ms / 1000
        self.request_timeout_ms = request_timeout_ms
        self.metadata_timeout = metadata_timeout_ms / 1000
        self.clock = clock or Clock()
        self.pool = ConnectionPool(bootstrap_servers, client_id, request_timeout_ms,
                                   ssl_context=ssl_context, security=security,
                                   clock=self.clock, rng=rng)
        self.metadata = ClusterMetadata(self.pool)
        self._parts: dict[TopicPartition, _PartitionState] = {}
        self._undesignated: dict[str, list] = {}        # topic -> [(key, value, headers, ts, fut, created)]
        self._sticky: dict[str, tuple[TopicMetadata, int]] = {}     # topic -> (metadata, partition)
        self._rr = itertools.count()
        self._node_inflight: dict[int, int] = collections.defaultdict(int)
        # Every future send() returned that may not be done yet; a batch's leave when it completes
        # (one set operation per batch, not a done-callback per record), flush() prunes the rest.
        self._outstanding: set[asyncio.Future] = set()
        self._flushing = 0
        self._wake = asyncio.Event()
        self._sender: asyncio.Task | None = None
        self._producer_id = -1
        self._producer_epoch = -1
        self._started = False
        self._closed = False
        # KIP-253: keyed records placed in partitions, per (topic, key): [partition, count]; and
        # records held back until their key's records in another partition are resolved.
        self._placed_keys: dict[tuple, list] = {}
        self._held: dict[str, collections.deque] = {}
        self._held_keys: dict[tuple, int] = collections.defaultdict(int)
        self._held_futs: set[asyncio.Future] = set()
        self._unplaced_futs: set[asyncio.Future] = set()      # keyed, waiting for metadata
        # KIP-253 part 9: cleanup.policy per topic; (topic, P1) -> (valid until, send tombstone)
        self.tombstone_check_interval = tombstone_check_interval_ms / 1000
        self._compacted: dict[str, bool] = {}
        self._tombstone_checks: dict[tuple[str, int], tuple[float, bool]] = {}
        self._lookups: dict[tuple, asyncio.Task] = {}
        self.tombstones_sent = 0
        self._txn = None if transactional_id is None else TransactionManager(
            self.pool, transactional_id, transaction_timeout_ms, self.retry_backoff, self._wake.set)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.pool.on_ready(self._wake.set)
        self.metadata.on_update(self._on_metadata)
        await self.metadata.refresh(timeout=self.metadata_timeout)      # bootstrap + brokers
        if self.idempotent and self._txn is None:       # transactional: init_transactions()
            await self._init_producer_id()
        self._sender = asyncio.get_running_loop().create_task(self._run(), name="producer-sender")

    async def _init_producer_id(self) -> None:
        loop = asyncio.get_running_loop()
        end = loop.time() + self.metadata_timeout
        while True:
            try:
                node, conn = await self.pool.any_connection()
                version = self.pool.version(conn, InitProducerIdRequest)
                resp = await conn.request(InitProducerIdRequest(
                    transactional_id=None, transaction_timeout_ms=-1, producer_id=-1,
                    producer_epoch=-1), version, timeout=self.pool.request_timeout)
                if resp.error_code == 0:
                    self._producer_id, self._producer_epoch = resp.producer_id, resp.producer_epoch
                    return
                err = Errors.for_code(resp.error_code)
                if not err.retriable:
                    raise err("InitProducerId")
            except (Errors.KafkaConnectionError, Errors.NodeNotReadyError, ConnectionError,
                    asyncio.TimeoutError) as e:
                if loop.time() > end:
                    raise Errors.KafkaTimeoutError(f"InitProducerId: {e!r}") from e
            await asyncio.sleep(self.retry_backoff)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring linger) and wait until each send has completed."""
        pending = [f for f in self._outstanding if not f.done()]
        self._outstanding = set(pending)
        if not pending:
            return
        self._flushing += 1
        self._wake.set()
        try:
            await asyncio.wait(pending, timeout=timeout)
        finally:
            self._flushing -= 1

    async def stop(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        if self._started:
            await self.flush(timeout)
        self._closed = True
        for fut in list(self._outstanding):
            if not fut.done():
                fut.set_exception(Errors.KafkaError("producer closed"))
        self._outstanding.clear()
        for task in list(self._lookups.values()):
            task.cancel()
        if self._sender is not None:
            await cancel_and_wait(self._sender)
        self.metadata.close()
        self.pool.close()

    async def __aenter__(self) -> "Producer":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # ------------------------------------------------------------------ transactions
    def _transactional(self) -> TransactionManager:
        if self._txn is None:
            raise Errors.IllegalStateError("not a transactional producer (transactional_id)")
        if not self._started or self._closed:
            raise Errors.IllegalStateError("producer is not started or is closed")
        return self._txn

    async def init_transactions(self) -> None:
        """Get the transactional id's producer id and a new epoch (fencing older producers; the
        coordinator aborts their open transaction)."""
        txn = self._transactional()
        await txn.init()
        self._producer_id, self._producer_epoch = txn.producer_id, txn.producer_epoch
        for st in self._parts.values():
            st.next_sequence = 0                # a new epoch numbers from 0

    def begin_transaction(self) -> None:
        txn = self._transactional()
        txn.check(need_txn=False)
        if txn.in_transaction:
            raise Errors.IllegalStateError("a transaction is already in progress")
        txn.in_transaction = True

    async def send_offsets_to_transaction(self, offsets: dict, group_metadata:
                                          ConsumerGroupMetadata | str) -> None:
        """Commit the consumer's `offsets` ({TopicPartition: next offset}) with the transaction."""
        if isinstance(group_metadata, str):
            group_metadata = ConsumerGroupMetadata(group_metadata)
        await self._transactional().send_offsets(offsets, group_metadata)

    async def commit_transaction(self) -> None:
        """Flush the transaction's sends, then EndTxn(commit); raises if any send failed."""
        self._transactional().check()
        await self.flush()
        await self._txn.end(True)

    async def abort_transaction(self) -> None:
        self._transactional().check()
        await self.flush()
        await self._txn.end(False)

    # ------------------------------------------------------------------ send
    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             headers: list[tuple[str, bytes | None]] | None = None,
             partition: int | None = None, timestamp_ms: int | None = None) -> asyncio.Future:
        """Queue one record; the future resolves to RecordMetadata or raises the KafkaError."""
        loop = asyncio.get_running_loop()
        fut = self._new_future(loop)
        if fut.done():
            return fut
        if key is not None and partition is None:
            fut.add_done_callback(lambda f, k=(topic, key): self._key_done(k, f))
        ts = self.clock.now_ms() if timestamp_ms is None else timestamp_ms
        rec = (key, value, list(headers) if headers else (), ts)
        md = self.metadata.topic(topic)
        if partition is None and (md is None or not md.partitions or md.error_code):
            if key is not None:
                self._unplaced_futs.add(fut)
            self._undesignated.setdefault(topic, []).append((rec, fut, loop.time(), partition))
            self.metadata.request_update(topic)
            self._wake.set()
            return fut
        self._place(topic, rec, fut, loop.time(), partition, md)
        return fut

    def send_batch(self, topic: str, partition: int, n: int, build: Callable,
                   count: int) -> asyncio.Future:
        """Queue `n` records already encoded by the caller, to a fixed partition:
        `build(producer_id, producer_epoch, base_sequence)` returns the v2 batch (called once, when
        the batch is sent; a retry resends the same bytes).  `count` is the undeleted partition
        count the caller partitioned with; when the topic's count changes first, the future fails
        with StalePartitioningError and nothing of the batch was written.  The future resolves to
        the RecordMetadata of the batch's first record."""
        loop = asyncio.get_running_loop()
        fut = self._new_future(loop)
        if fut.done():
            return fut
        tp = TopicPartition(topic, partition)
        st = self._parts.get(tp)
        if st is None:
            st = self._parts[tp] = _PartitionState()
        if st.batches:
            st.batches[-1].closed = True
        st.batches.append(_Batch(tp, loop.time(), futures=[fut], closed=True, count=count,
                                 build=build, n=n))
        self._wake.set()
        return fut

    def _new_future(self, loop) -> asyncio.Future:
        """A send's future, tracked until done; failed at once when the producer is not running."""
        fut = loop.create_future()
        if self._closed or not self._started:
            fut.set_exception(Errors.IllegalStateError("producer is not started or is closed"))
            return fut
        if self._txn is not None:
            try:
                self._txn.check()           # in a transaction, and not fenced
            except Errors.KafkaError as e:
                fut.set_exception(e)
                return fut
        self._outstanding.add(fut)      # leaves with its batch (_complete / _fail), or at flush
        return fut

    def _partition(self, topic: str, key: bytes | None, md: TopicMetadata) -> int:
        if self.partitioner is not None:
            return self.partitioner(topic, key, md)
        if key is not None:
            return linear_hashing_partitioner(topic, key, md)
        # The sticky partition holds while the topic's metadata is the same object (a refresh
        # replaces it): KIP-253's counts are not looked at again for every record.
        sticky = self._sticky.get(topic)
        if sticky is not None and sticky[0] is md:
            return sticky[1]
        counts = kip253_counts(md)
        count = counts[1] if counts else md.producer_partition_count
        p = sticky[1] if sticky is not None else None
        if p is None or p >= count:
            p = next(self._rr) % count
        self._sticky[topic] = (md, p)
        return p

    def _unstick(self, tp: TopicPartition) -> None:
        sticky = self._sticky.get(tp.topic)
        if sticky is not None and sticky[1] == tp.partition:
            del self._sticky[tp.topic]

    # ------------------------------------------------------------------ KIP-253 key order
    def _place(self, topic: str, rec: tuple, fut: asyncio.Future, created: float,
               partition: int | None, md: TopicMetadata | None) -> None:
        """Partition (unless pinned) and append, or hold a keyed record whose key still has
        unacknowledged records in another partition (or records held before it)."""
        key = rec[0]
        if partition is not None or key is None:
            p = self._partition(topic, key, md) if partition is None else partition
            self._append(TopicPartition(topic, p), rec, fut, created,
                         md.undeleted_partition_count if md is not None else -1,
                         partition is not None)
            return
        self._unplaced_futs.discard(fut)
        p = self._partition(topic, key, md)
        k = (topic, key)
        placed = self._placed_keys.get(k)
        if self._held_keys.get(k) or (placed is not None and placed[0] != p):
            self._held.setdefault(topic, collections.deque()).append((rec, fut, created))
            self._held_keys[k] += 1
            self._held_futs.add(fut)
            return
        self._place_keyed(topic, rec, fut, created, p, md)

    def _place_keyed(self, topic: str, rec: tuple, fut: asyncio.Future, created: float, p: int,
                     md: TopicMetadata) -> None:
        key = rec[0]
        k = (topic, key)
        placed = self._placed_keys.get(k)
        if placed is None:
            self._placed_keys[k] = [p, 1]
        else:
            placed[1] += 1
        self._append(TopicPartition(topic, p), rec, fut, created, md.undeleted_partition_count)
        self._maybe_tombstone(topic, key, p, md)

    def _key_done(self, k: tuple, fut: asyncio.Future) -> None:
        if fut in self._unplaced_futs:
            self._unplaced_futs.discard(fut)
            return
        if fut in self._held_futs:
            self._held_futs.discard(fut)
            self._held_keys[k] -= 1
            if self._held_keys[k] <= 0:
                del self._held_keys[k]
            return
        placed = self._placed_keys.get(k)
        if placed is None:
            return
        placed[1] -= 1
        if placed[1] <= 0:
            del self._placed_keys[k]
            if k[0] in self._held and not self._closed:
                self._release_held(k[0])

    def _release_held(self, topic: str) -> None:
        md = self.metadata.topic(topic)
        if topic not in self._held or md is None or not md.partitions or md.error_code:
            return
        held = self._held.pop(topic)
        keep: collections.deque = collections.deque()
        blocked: set = set()
        for rec, fut, created in held:
            if fut.done():
                continue
            k = (topic, rec[0])
            placed = self._placed_keys.get(k)
            p = self._partition(topic, rec[0], md)
            if k in blocked or (placed is not None and placed[0] != p):
                blocked.add(k)
                keep.append((rec, fut, created))
                continue
            self._held_futs.discard(fut)
            self._held_keys[k] -= 1
            if self._held_keys[k] <= 0:
                del self._held_keys[k]
            self._place_keyed(topic, rec, fut, created, p, md)
        if keep:
            self._held[topic] = keep
        self._wake.set()

    def _repartition(self, tp: TopicPartition, st: _PartitionState, md: TopicMetadata) -> None:
        """Partition again, in order, every record of tp's batches (none of them in flight)."""
        batches = list(st.batches)
        st.batches.clear()
        st.hold = False
        sealed = [b.base_sequence for b in batches if b.encoded is not None and b.base_sequence >= 0]
        if self.idempotent and sealed:
            st.next_sequence = sealed[0]          # queue order is sequence order
        self._unstick(tp)
        for b in batches:
            if b.build is not None:
                self._fail(b, StalePartitioningError(f"{tp}: undeleted partition count {b.count} "
                                                     f"is now {md.undeleted_partition_count}"))
                continue
            for rec, fut, pinned in zip(b.records, b.futures, b.pinned):
                if fut.done():
                    continue
                if pinned or rec[0] is None:
                    self._place(tp.topic, rec, fut, b.created, tp.partition if pinned else None, md)
                    continue
                k = (tp.topic, rec[0])
                placed = self._placed_keys.get(k)
                p = self._partition(tp.topic, rec[0], md)
                if placed is not None:           # all of k's placed records are here: move them
                    placed[0] = p
                self._append(TopicPartition(tp.topic, p), rec, fut, b.created,
                             md.undeleted_partition_count)
        if tp.topic in self._held:
            self._release_held(tp.topic)

    # ------------------------------------------------------------------ KIP-253 part 9
    def _maybe_tombstone(self, topic: str, key: bytes, p: int, md: TopicMetadata) -> None:
        counts = kip253_counts(md)
        if counts is None or not (counts[0] < counts[1] and p >= counts[0]):
            return
        compacted = self._compacted.get(topic)
        if compacted is None:
            self._lookup(("compacted", topic), self._lookup_compacted(topic))
            return
        if not compacted:
            return
        now = asyncio.get_running_loop().time()
        check = self._tombstone_checks.get((topic, p))
        if check is None or now > check[0]:
            self._lookup(("tombstone", topic, p), self._check_parent(topic, p, counts[0]))
        if check is not None and check[1]:
            self._send_tombstone(topic, partition_parent(p, counts[0]), key,
                                 md.undeleted_partition_count)

    def _lookup(self, name: tuple, coro) -> None:
        if name in self._lookups or self._closed:
            coro.close()
            return
        task = asyncio.get_running_loop().create_task(coro)
        self._lookups[name] = task
        task.add_done_callback(lambda t: (self._lookups.pop(name, None),
                                          t.cancelled() or t.exception()))

    async def _lookup_compacted(self, topic: str) -> None:
        try:
            node, conn = await self.pool.any_connection()
            R = DescribeConfigsRequest
            resp = await conn.request(R(resources=[R.DescribeConfigsResource(
                resource_type=2, resource_name=topic, configuration_keys=["cleanup.policy"])],
                include_synonyms=False, include_documentation=False),
                self.pool.version(conn, R, hi=4), timeout=self.pool.request_timeout)
            r = resp.results[0]
            if r.error_code == 0:
                policy = next((c.value for c in r.configs if c.name == "cleanup.policy"), "") or ""
                self._compacted[topic] = "compact" in policy
        except Exception as e:  # noqa: BLE001 - looked up again with the next record
            log.debug("cleanup.policy of %s: %r", topic, e)

    async def _check_parent(self, topic: str, p: int, n: int) -> None:
        loop = asyncio.get_running_loop()
        parent = partition_parent(p, n)
        try:
            after, _ = (await partition_leader_epochs(self.pool, topic, [p]))[p]
            if parent not in after:
                self._tombstone_checks[(topic, p)] = (loop.time() + 3600, False)
                return
            lower_end = await epoch_end_offset(self.pool, self.metadata, topic, parent,
                                               after[parent])
            tp = TopicPartition(topic, parent)
            earliest = (await list_offsets(self.pool, self.metadata, {tp: EARLIEST},
                                           timeout=self.pool.request_timeout))[tp][0]
            # lowerOffsetThreshold = lower_end - 1; no record before the expansion: nothing to do.
            send = lower_end > 0 and earliest > lower_end - 1
            self._tombstone_checks[(topic, p)] = (loop.time() + self.tombstone_check_interval, send)
        except Exception as e:  # noqa: BLE001 - checked again with the next record
            log.debug("tombstone check %s-%d: %r", topic, p, e)

    def _send_tombstone(self, topic: str, partition: int, key: bytes, count: int) -> None:
        leader = self.metadata.leader(topic, partition)
        conn = self.pool.get_nowait(leader) if leader >= 0 else None
        if conn is None:
            return
        try:
            version = self.pool.version(conn, ProduceRequest, lo=9)
        except Errors.KafkaError:
            return
        cls = ProduceRequestKip253
        data = encode_batch([(key, None, [], self.clock.now_ms())], self.compression)
        req = cls(transactional_id=None, acks=0, timeout_ms=self.request_timeout_ms, topic_data=[
            cls.TopicProduceData(name=topic, undeleted_partition_count=count, partition_data=[
                cls.TopicProduceData.PartitionProduceData(index=partition, records=data)])])
        conn.send(req, version, response_class=ProduceResponse)
        self.tombstones_sent += 1

    def _append(self, tp: TopicPartition, rec: tuple, fut: asyncio.Future, now: float,
                count: int = -1, pinned: bool = False) -> None:
        st = self._parts.get(tp)
        if st is None:
            st = self._parts[tp] = _PartitionState()
        key, value, headers = rec[0], rec[1], rec[2]
        size = estimate_size(key, value, headers) if headers else \
            21 + (len(key) if key else 0) + (len(value) if value else 0)    # estimate_size's
        last = st.batches[-1] if st.batches else None
        if last is None or last.closed or last.count != count or \
                (last.records and last.size + size > self.batch_size):
            if last is not None and not last.closed:
                last.closed = True
                self._unstick(tp)       # a full batch moves the sticky partition
            last = _Batch(tp, now, count=count)
            st.batches.append(last)
            self._wake.set()
        last.records.append(rec)
        last.futures.append(fut)
        last.pinned.append(pinned)
        last.size += size
        if last.size >= self.batch_size:
            last.closed = True
            self._wake.set()
        elif self.linger <= 0:
            self._wake.set()

    def _on_metadata(self) -> None:
        now = asyncio.get_running_loop().time()
        for topic in list(self._undesignated):
            md = self.metadata.topic(topic)
            if md is None or not md.partitions or md.error_code:
                continue
            for rec, fut, created, _ in self._undesignated.pop(topic):
                if fut.done():
                    continue
                self._place(topic, rec, fut, created if created else now, None, md)
        for topic in list(self._held):
            self._release_held(topic)
        self._wake.set()

    # ------------------------------------------------------------------ the sender
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._closed:
            self._wake.clear()
            delay = self._drain(loop.time())
            if self._wake.is_set():
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), delay)
            except asyncio.TimeoutError:
                pass

    def _drain(self, now: float) -> float:
        """Send every ready batch whose leader can take another request; return the next wake-up."""
        delay = 0.5
        self._expire_undesignated(now)
        by_node: dict[int, list[tuple[TopicPartition, _PartitionState]]] = {}
        stale: list[tuple[TopicPartition, _PartitionState, TopicMetadata]] = []
        probes: list[tuple[TopicPartition, _PartitionState, _Batch]] = []
        for tp, st in self._parts.items():
            if not st.batches:
                continue
            first = st.batches[0]
            md = self.metadata.topic(tp.topic)
            if md is not None and md.partitions and not md.error_code and \
                    first.count != md.undeleted_partition_count:
                # KIP-253: partitioned with another undeleted count; once nothing is in flight,
                # resend each batch the log may hold as it is (_unresolved), then partition the
                # records again (the broker would refuse them here anyway).
                if not st.inflight:
                    probe = self._unresolved(st)
                    if probe is None:
                        stale.append((tp, st, md))
                    elif st.backoff_until <= now:
                        probes.append((tp, st, probe))
                continue
            if now - first.created > self.delivery_timeout and not first.encoded:
                self._expire(st, now)
                if not st.batches:
                    continue
                first = st.batches[0]
            if st.backoff_until > now:
                delay = min(delay, st.backoff_until - now)
                continue
            if st.hold:
                if st.inflight:
                    continue
                st.hold = False
            limit = 1 if (st.retried and not self.idempotent) else self.max_in_flight
            if st.inflight >= limit:
                continue
            ready = (first.closed or len(st.batches) > 1 or self._flushing or first.retry
                     or now - first.created >= self.linger)
            if not ready:
                delay = min(delay, first.created + self.linger - now)
                continue
            leader = self.metadata.leader(tp.topic, tp.partition)
            if leader < 0:
                self._leader_unusable(tp, st, now)
                delay = min(delay, self.retry_backoff)
                continue
            if self._txn is not None and not self._txn.ready(tp):
                while self._txn.add_error is not None and st.batches:
                    self._fail(st.batches.popleft(), self._txn.add_error)
                continue                    # AddPartitionsToTxn first; it wakes the sender
            by_node.setdefault(leader, []).append((tp, st))
        if stale:
            for tp, st, md in stale:
                self._repartition(tp, st, md)
            self._wake.set()
            return 0.001
        for tp, st, batch in probes:
            delay = min(delay, self._send_probe(tp, st, batch, now))
        for node, parts in by_node.items():
            conn = self.pool.get_nowait(node)
            if conn is None:
                if self.pool.connect_failed(node):     # leader unreachable: it may have moved
                    self._unreachable(node, parts, now)
                    delay = min(delay, self.retry_backoff)
                continue
            while parts and self._node_inflight[node] < self.max_in_flight:
                taken = []
                rest = []
                for tp, st in parts:
                    limit = 1 if (st.retried and not self.idempotent) else self.max_in_flight
                    if st.batches and st.inflight < limit and not st.hold and \
                            self._sendable(st.batches[0], now):
                        taken.append((tp, st, st.batches.popleft()))
                        if st.batches:
                            rest.append((tp, st))
                if not taken:
                    break
                self._send_request(node, conn, taken)
                parts = rest
        return max(delay, 0.001)

    def _unresolved(self, st: _PartitionState) -> _Batch | None:
        """The first batch whose records may be in the log (sent, answered by nothing conclusive).
        Its sequence numbers cannot go to other records, so it is sent again as it is before the
        partition's batches are partitioned again: the leader answers a duplicate with its offsets
        or refuses it as stale (then the log does not hold it)."""
        if not self.idempotent:
            return None
        return next((b for b in st.batches if b.sent and not b.unwritten), None)

    def _send_probe(self, tp: TopicPartition, st: _PartitionState, batch: _Batch,
                    now: float) -> float:
        md = self.metadata.topic(tp.topic)
        if md is None or tp.partition >= len(md.partitions):
            batch.unwritten = True          # the partition is gone, and what it held with it
            self._wake.set()
            return 0.001
        leader = self.metadata.leader(tp.topic, tp.partition)
        conn = self.pool.get_nowait(leader) if leader >= 0 else None
        if conn is None:
            if leader < 0 or self.pool.connect_failed(leader):
                self._leader_unusable(tp, st, now)
            return self.retry_backoff
        if self._node_inflight[leader] >= self.max_in_flight:
            return self.retry_backoff
        st.batches.remove(batch)
        self._send_request(leader, conn, [(tp, st, batch)])
        return 0.5

    def _unreachable(self, node: int, parts: list, now: float) -> None:
        """Connecting to `node` failed: look for the leader again, unless the broker refused
        our SASL; then the batches fail with its refusal (not retried, as Kafka's
        AuthenticationException)."""
        refused = self.pool.auth_failure(node)
        for tp, st in parts:
            if refused is None:
                self._leader_unusable(tp, st, now)
            while refused is not None and st.batches:
                self._fail(st.batches.popleft(), refused)

    def _leader_unusable(self, tp: TopicPartition, st: _PartitionState, now: float) -> None:
        """No leader, or it cannot be reached: refresh metadata and look again after a backoff.
        Without the backoff each refresh's answer (which may name the same leader, reachable by
        the cluster but not by us) wakes the sender, which starts the next refresh at once."""
        st.backoff_until = max(st.backoff_until, now + self.retry_backoff)
        self.metadata.request_update(tp.topic)

    def _sendable(self, batch: _Batch, now: float) -> bool:
        return batch.closed or self._flushing > 0 or batch.retry or now - batch.created >= self.linger

    def _seal(self, st: _PartitionState, batch: _Batch) -> bytes:
        if batch.encoded is None:
            batch.closed = True
            self._unstick(batch.tp)
            if self.idempotent:
                batch.base_sequence = st.next_sequence
                n = batch.n if batch.build is not None else len(batch.records)
                st.next_sequence = (st.next_sequence + n) & 0x7FFFFFFF
            if batch.build is not None:
                batch.encoded = batch.build(self._producer_id, self._producer_epoch,
                                            batch.base_sequence)
                if self._txn is not None:
                    batch.encoded = mark_transactional(batch.encoded)
            else:
                batch.encoded = encode_batch(batch.records, self.compression, self._producer_id,
                                             self._producer_epoch, batch.base_sequence,
                                             self._txn is not None)
        return batch.encoded

    def _send_request(self, node: int, conn, taken: list) -> None:
        by_topic: dict[str, list] = {}
        for tp, st, batch in taken:
            data = self._seal(st, batch)
            batch.sent = True
            by_topic.setdefault(tp.topic, []).append((tp.partition, data))
            st.inflight += 1
        version = self.pool.version(conn, ProduceRequest, lo=3)
        cls = ProduceRequestKip253 if version >= 9 else ProduceRequest
        topics = []
        for topic, parts in by_topic.items():
            extra = {}
            if cls is ProduceRequestKip253:
                # Every batch sent had the topic's current count (stale ones are re-partitioned).
                extra["undeleted_partition_count"] = next(
                    b.count for tp, _, b in taken if tp.topic == topic)
            topics.append(cls.TopicProduceData(name=topic, partition_data=[
                cls.TopicProduceData.PartitionProduceData(index=index, records=data)
                for index, data in parts], **extra))
        req = cls(transactional_id=self._txn and self._txn.transactional_id, acks=self.acks,
                  timeout_ms=self.request_timeout_ms, topic_data=topics)
        self._node_inflight[node] += 1
        fut = conn.send(req, version, response_class=ProduceResponse)
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self.request_timeout_ms / 1000 + 1, self._request_timed_out,
                                conn, fut)
        fut.add_done_callback(lambda f: self._on_response(node, taken, f, timer))

    @staticmethod
    def _request_timed_out(conn, fut) -> None:
        if not fut.done():
            conn.close("produce request timed out")        # fails every request in flight on it

    # ------------------------------------------------------------------ responses
    def _on_response(self, node: int, taken: list, fut: asyncio.Future, timer) -> None:
        timer.cancel()
        self._node_inflight[node] -= 1
        self._wake.set()
        for _, st, _ in taken:
            st.inflight -= 1
        if not fut.cancelled():
            fut.exception()
        if self._closed:
            return
        if fut.cancelled() or fut.exception() is not None:
            exc = fut.exception() if not fut.cancelled() else None
            self.pool.close_node(node, "produce request failed")
            for tp, st, batch in taken:     # a refused re-authentication is not retried
                self._retry_or_fail(st, batch, exc if isinstance(exc, AuthenticationFailed)
                                    else Errors.KafkaConnectionError(repr(exc)))
            return
        resp = fut.result()
        if resp is None:                     # acks=0
            for _, _, batch in taken:
                self._complete(batch, -1, -1)
            return
        results = {}
        for t in resp.responses:
            for p in t.partition_responses:
                results[(t.name, p.index)] = p
        for tp, st, batch in taken:
            p = results.get((tp.topic, tp.partition))
            if p is None:
                self._retry_or_fail(st, batch, Errors.UnknownError("no response for partition"))
            elif p.error_code == 0 or p.error_code == Errors.DuplicateSequenceNumberError.errno:
                self._complete(batch, p.base_offset, p.log_append_time_ms)
            else:
                if p.error_code == INVALID_PARTITION_METADATA:
                    batch.unwritten = True
                err_cls = for_code(p.error_code)
                self._retry_or_fail(st, batch, err_cls(p.error_message or ""))

    def _complete(self, batch: _Batch, base_offset: int, log_append_time: int) -> None:
        self._outstanding.difference_update(batch.futures)
        tp = batch.tp
        if batch.build is not None:
            if not batch.futures[0].done():
                batch.futures[0].set_result(RecordMetadata(tp.topic, tp.partition, base_offset,
                                                           log_append_time))
            return
        for i, (rec, fut) in enumerate(zip(batch.records, batch.futures)):
            if not fut.done():
                ts = log_append_time if log_append_time is not None and log_append_time >= 0 \
                    else rec[3]
                fut.set_result(RecordMetadata(tp.topic, tp.partition,
                                              base_offset + i if base_offset >= 0 else -1, ts))

    def _fail(self, batch: _Batch, exc: Exception) -> None:
        if self._txn is not None:
            self._txn.failed(exc)
        self._outstanding.difference_update(batch.futures)
        for fut in batch.futures:
            if not fut.done():
                fut.set_exception(exc)

    def _retry_or_fail(self, st: _PartitionState, batch: _Batch, exc: Exception) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        retriable = getattr(exc, "retriable", False) or \
            getattr(exc, "errno", None) in _RETRIABLE_CODES
        if not retriable or batch.attempts >= self.retries or \
                now - batch.created > self.delivery_timeout:
            if retriable and now - batch.created > self.delivery_timeout:
                exc = Errors.KafkaTimeoutError(f"delivery timeout after {batch.attempts + 1} "
                                               f"attempts; last error {exc!r}")
            self._fail(batch, exc)
            return
        batch.attempts += 1
        batch.retry = True
        # Back in sequence order (idempotent) / at the head (otherwise), ahead of unsent batches.
        if self.idempotent:
            i = 0
            while i < len(st.batches) and st.batches[i].encoded is not None and \
                    st.batches[i].base_sequence < batch.base_sequence:
                i += 1
            st.batches.insert(i, batch)
        else:
            st.batches.appendleft(batch)
            st.retried = True
        st.hold = True
        st.backoff_until = max(st.backoff_until, now + self.retry_backoff)
        if isinstance(exc, _METADATA_ERRORS) or not isinstance(exc, Errors.OutOfOrderSequenceNumberError):
            self.metadata.request_update(batch.tp.topic)

    def _expire(self, st: _PartitionState, now: float) -> None:
        while st.batches and st.batches[0].encoded is None and \
                now - st.batches[0].created > self.delivery_timeout:
            b = st.batches.popleft()
            self._fail(b, Errors.KafkaTimeoutError(
                f"{b.n or len(b.records)} record(s) for {b.tp} expired before they could be sent"))

    def _expire_undesignated(self, now: float) -> None:
        for topic, recs in list(self._undesignated.items()):
            keep = []
            for item in recs:
                rec, fut, created, _ = item
                if fut.done():
                    continue
                if now - created > min(self.delivery_timeout, self.metadata_timeout):
                    md = self.metadata.topic(topic)
                    err = Errors.for_code(md.error_code) if md and md.error_code else None
                    fut.set_exception(Errors.KafkaTimeoutError(
                        f"no metadata for topic {topic}" + (f" ({err.__name__})" if err else "")))
                    self._outstanding.discard(fut)
                else:
                    keep.append(item)
            if keep:
                self._undesignated[topic] = keep
            else:
                del self._undesignated[topic]
