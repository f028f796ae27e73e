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
- Partitioning: `partitioner(topic, key, topic_metadata) -> partition` if given; otherwise Kafka's
  default, `(murmur2(key) & 0x7fffffff) % count` for keys and a sticky partition for unkeyed
  records (kept until its batch is sent, then the next one round-robin).  `count` is KIP-253's
  undeleted partition count when the broker reports it.

Not implemented: transactions; resetting the producer id after a fatal (non-retriable) error in
idempotent mode (the partition's later batches then keep failing with OUT_OF_ORDER_SEQUENCE).
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

import kafka.errors as Errors
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest, ProduceResponse

from minibroker.client.connection_pool import ConnectionPool
from minibroker.client.metadata import ClusterMetadata, TopicMetadata
from minibroker.client.records import (RecordMetadata, TopicPartition, codec_id, encode_batch,
                                       estimate_size)
from minibroker.clock import Clock
from minibroker.partitioning import key_hash
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
                 metadata_timeout_ms: int = 60000, clock: Clock | None = None) -> None:
        acks = -1 if acks == "all" else int(acks)
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1/'all', 0 or 1, not {acks}")
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
        self.pool = ConnectionPool(bootstrap_servers, client_id, request_timeout_ms)
        self.metadata = ClusterMetadata(self.pool)
        self._parts: dict[TopicPartition, _PartitionState] = {}
        self._undesignated: dict[str, list] = {}        # topic -> [(key, value, headers, ts, fut, created)]
        self._sticky: dict[str, int] = {}
        self._rr = itertools.count()
        self._node_inflight: dict[int, int] = collections.defaultdict(int)
        self._outstanding: set[asyncio.Future] = set()
        self._flushing = 0
        self._wake = asyncio.Event()
        self._sender: asyncio.Task | None = None
        self._producer_id = -1
        self._producer_epoch = -1
        self._started = False
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.pool.on_ready(self._wake.set)
        self.metadata.on_update(self._on_metadata)
        await self.metadata.refresh(timeout=self.metadata_timeout)      # bootstrap + brokers
        if self.idempotent:
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
        pending = list(self._outstanding)
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
        if self._sender is not None:
            self._sender.cancel()
            try:
                await self._sender
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        self.metadata.close()
        self.pool.close()

    async def __aenter__(self) -> "Producer":
        await self.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.stop()

    # ------------------------------------------------------------------ send
    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             headers: list[tuple[str, bytes | None]] | None = None,
             partition: int | None = None, timestamp_ms: int | None = None) -> asyncio.Future:
        """Queue one record; the future resolves to RecordMetadata or raises the KafkaError."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        if self._closed or not self._started:
            fut.set_exception(Errors.IllegalStateError("producer is not started or is closed"))
            return fut
        self._outstanding.add(fut)
        fut.add_done_callback(self._outstanding.discard)
        ts = self.clock.now_ms() if timestamp_ms is None else timestamp_ms
        rec = (key, value, list(headers or ()), ts)
        md = self.metadata.topic(topic)
        if partition is None and (md is None or not md.partitions or md.error_code):
            self._undesignated.setdefault(topic, []).append((rec, fut, loop.time(), partition))
            self.metadata.request_update(topic)
            self._wake.set()
            return fut
        if partition is None:
            partition = self._partition(topic, key, md)
        self._append(TopicPartition(topic, partition), rec, fut, loop.time())
        return fut

    def _partition(self, topic: str, key: bytes | None, md: TopicMetadata) -> int:
        if self.partitioner is not None:
            return self.partitioner(topic, key, md)
        count = md.producer_partition_count
        if key is not None:
            return key_hash(key) % count
        p = self._sticky.get(topic)
        if p is None or p >= count:
            p = self._sticky[topic] = next(self._rr) % count
        return p

    def _append(self, tp: TopicPartition, rec: tuple, fut: asyncio.Future, now: float) -> None:
        st = self._parts.get(tp)
        if st is None:
            st = self._parts[tp] = _PartitionState()
        size = estimate_size(rec[0], rec[1], rec[2])
        last = st.batches[-1] if st.batches else None
        if last is None or last.closed or (last.records and last.size + size > self.batch_size):
            if last is not None and not last.closed:
                last.closed = True
                if self._sticky.get(tp.topic) == tp.partition:
                    self._sticky.pop(tp.topic, None)      # a full batch moves the sticky partition
            last = _Batch(tp, now)
            st.batches.append(last)
            self._wake.set()
        last.records.append(rec)
        last.futures.append(fut)
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
                self._append(TopicPartition(topic, self._partition(topic, rec[0], md)), rec,
                             fut, created if created else now)
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
        for tp, st in self._parts.items():
            if not st.batches:
                continue
            first = st.batches[0]
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
                self.metadata.request_update(tp.topic)
                continue
            by_node.setdefault(leader, []).append((tp, st))
        for node, parts in by_node.items():
            conn = self.pool.get_nowait(node)
            if conn is None:
                if self.pool.connect_failed(node):     # leader unreachable: it may have moved
                    for tp, _ in parts:
                        self.metadata.request_update(tp.topic)
                    delay = min(delay, self.metadata.refresh_backoff)
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

    def _sendable(self, batch: _Batch, now: float) -> bool:
        return batch.closed or self._flushing > 0 or batch.retry or now - batch.created >= self.linger

    def _seal(self, st: _PartitionState, batch: _Batch) -> bytes:
        if batch.encoded is None:
            batch.closed = True
            if self._sticky.get(batch.tp.topic) == batch.tp.partition:
                self._sticky.pop(batch.tp.topic, None)
            if self.idempotent:
                batch.base_sequence = st.next_sequence
                st.next_sequence = (st.next_sequence + len(batch.records)) & 0x7FFFFFFF
            batch.encoded = encode_batch(batch.records, self.compression, self._producer_id,
                                         self._producer_epoch, batch.base_sequence)
        return batch.encoded

    def _send_request(self, node: int, conn, taken: list) -> None:
        by_topic: dict[str, list] = {}
        for tp, st, batch in taken:
            data = self._seal(st, batch)
            by_topic.setdefault(tp.topic, []).append((tp.partition, data))
            st.inflight += 1
        version = self.pool.version(conn, ProduceRequest, lo=3)
        cls = ProduceRequestKip253 if version >= 9 else ProduceRequest
        topics = []
        for topic, parts in by_topic.items():
            extra = {}
            if cls is ProduceRequestKip253:
                md = self.metadata.topic(topic)
                extra["undeleted_partition_count"] = md.undeleted_partition_count if md else -1
            topics.append(cls.TopicProduceData(name=topic, partition_data=[
                cls.TopicProduceData.PartitionProduceData(index=index, records=data)
                for index, data in parts], **extra))
        req = cls(transactional_id=None, acks=self.acks, timeout_ms=self.request_timeout_ms,
                  topic_data=topics)
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
            for tp, st, batch in taken:
                self._retry_or_fail(st, batch, Errors.KafkaConnectionError(repr(exc)))
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
                err_cls = Errors.for_code(p.error_code)
                self._retry_or_fail(st, batch, err_cls(p.error_message or ""))

    def _complete(self, batch: _Batch, base_offset: int, log_append_time: int) -> None:
        tp = batch.tp
        for i, (rec, fut) in enumerate(zip(batch.records, batch.futures)):
            if not fut.done():
                ts = log_append_time if log_append_time is not None and log_append_time >= 0 \
                    else rec[3]
                fut.set_result(RecordMetadata(tp.topic, tp.partition,
                                              base_offset + i if base_offset >= 0 else -1, ts))

    def _fail(self, batch: _Batch, exc: Exception) -> None:
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
                f"{len(b.records)} record(s) for {b.tp} expired before they could be sent"))

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
                else:
                    keep.append(item)
            if keep:
                self._undesignated[topic] = keep
            else:
                del self._undesignated[topic]
