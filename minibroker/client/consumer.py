"""The poll-loop consumer: one task drives group membership, heartbeats, fetches and auto commits.

    consumer = Consumer("127.0.0.1:9092", group_id="g", auto_offset_reset="earliest")
    consumer.subscribe(["topic"])                # or consumer.assign([TopicPartition("topic", 0)])
    records = await consumer.poll(1.0)           # list[ConsumerRecord]
    await consumer.close()

The driver task (started by subscribe/assign) loops:
1. group (subscribe only): find the coordinator, JoinGroup with the 'consumer' protocol and our
   assignors, the leader assigns (range / roundrobin), SyncGroup, then OffsetFetch for the new
   partitions; heartbeat every `heartbeat_interval_ms` on a separate coordinator connection.
   REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID -> commit (auto), revoke, rejoin
   (minibroker.client.group_membership).
2. positions: partitions without one get the committed offset, else ListOffsets per
   `auto_offset_reset` (OFFSET_OUT_OF_RANGE resets the same way).
3. fetch: one Fetch request per leader, sent to all leaders at once, for the partitions with
   nothing buffered; responses are decoded (kafka-python's record reader, any codec), records
   before the fetch position dropped, and buffered per partition.  NOT_LEADER_OR_FOLLOWER /
   FENCED_LEADER_EPOCH / UNKNOWN_TOPIC_OR_PARTITION -> a metadata refresh of that topic only.
4. auto commit every `auto_commit_interval_ms`.
`poll` only takes from the buffers (up to `max_poll_records`), advancing positions.

KIP-253 (ordered delivery while partitions are added and deleted; `ordering_barrier=False` turns
the barrier off and gives a plain consumer):
- Fetch carries the topic's undeleted partition count; INVALID_PARTITION_METADATA refreshes
  metadata and rejoins the group.  A subscribed member also rejoins when the partitions or the
  undeleted count of a subscribed topic change in its metadata (drained partitions removed).
- The leader assigns undeleted and marked-for-deletion partitions as two lists, each with the
  chosen assignor (part 6).
- Parts 7 and 8 (what an assigned partition may deliver, and the ConsumerGroupPosition exchange):
  minibroker.client.ordering_barrier, which gates `poll` through each partition's `gate`.

read_committed: Fetch and ListOffsets carry the isolation level (the leader answers up to the last
stable offset); records of the aborted transactions the Fetch response lists are dropped
(records.drop_aborted), control batches always.  `group_metadata()` is what a transactional
producer's send_offsets_to_transaction takes.

Not implemented: fetch sessions (KIP-227: always full fetches), static membership, cooperative
rebalancing.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import random
from typing import Any, Iterable

import kafka.errors as Errors
from kafka.protocol.consumer import FetchResponse

from minibroker.client.connection_pool import ConnectionPool
from minibroker.client.group_membership import COORDINATOR_ERRORS, REJOIN_ERRORS
from minibroker.client.group_offsets import GroupOffsets
from minibroker.client.group_protocol import ASSIGNORS
from minibroker.client.lifecycle import PooledClient, cancel_and_wait
# EARLIEST, LATEST, list_offsets and PartitionKeyRebalanceListener are also imported from here.
from minibroker.client.list_offsets import EARLIEST, LATEST, REFRESH_ERRORS, list_offsets
from minibroker.client.metadata import ClusterMetadata
from minibroker.client.ordering_barrier import OrderingBarrier, PartitionKeyRebalanceListener
from minibroker.client.partition_state import PartitionState
from minibroker.client.records import (ConsumerGroupMetadata, ConsumerRecord, TopicPartition,
                                       decode_records, drop_aborted)
from minibroker.client.security import ClientSecurity
from minibroker.network.sasl_client import AuthenticationFailed
from minibroker.protocol.errors import INVALID_PARTITION_METADATA
from minibroker.protocol.messages import FetchRequestKip253

log = logging.getLogger("minibroker.client.consumer")

class Consumer(GroupOffsets, PooledClient):
    def __init__(self, bootstrap_servers: str | list[str], *, group_id: str | None = None,
                 client_id: str = "minibroker-consumer", auto_offset_reset: str = "latest",
                 enable_auto_commit: bool = True, auto_commit_interval_ms: int = 5000,
                 session_timeout_ms: int = 45000, heartbeat_interval_ms: int = 3000,
                 rebalance_timeout_ms: int = 60000, max_poll_records: int = 500,
                 fetch_max_wait_ms: int = 500, fetch_min_bytes: int = 1,
                 fetch_max_bytes: int = 52428800, max_partition_fetch_bytes: int = 1048576,
                 isolation_level: str = "read_uncommitted", request_timeout_ms: int = 30000,
                 retry_backoff_ms: int = 100, assignors: Iterable[str] = ("range", "roundrobin"),
                 allow_auto_create_topics: bool = True, ordering_barrier: bool = True,
                 metadata_max_age_ms: int = 300000, ssl_context: Any = None,
                 security: ClientSecurity | None = None,
                 rng: random.Random | None = None) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset {auto_offset_reset!r}")
        self.group_id = group_id
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit and group_id is not None
        self.auto_commit_interval = auto_commit_interval_ms / 1000
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval = heartbeat_interval_ms / 1000
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.max_poll_records = max_poll_records
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.isolation_level = 1 if isolation_level == "read_committed" else 0
        self.retry_backoff = retry_backoff_ms / 1000
        self.assignors = [a for a in assignors]
        for a in self.assignors:
            if a not in ASSIGNORS:
                raise ValueError(f"unknown assignor {a!r}")
        self.pool = ConnectionPool(bootstrap_servers, client_id, request_timeout_ms,
                                   ssl_context=ssl_context, security=security, rng=rng)
        self.metadata = ClusterMetadata(self.pool,
                                        allow_auto_topic_creation=allow_auto_create_topics)
        self._parts: dict[TopicPartition, PartitionState] = {}
        self._subscription: list[str] | None = None
        self._listener: Any = None
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._data: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._stopping = False
        # group state
        self.member_id = ""
        self.generation_id = -1
        self._coordinator: int | None = None
        self._rejoin = False
        self._joined = False
        self._next_heartbeat = 0.0
        self._heartbeat_inflight = False
        self._next_commit = 0.0
        self._node_fetching: set[int] = set()
        self._fetch_timers: dict[int, asyncio.TimerHandle] = {}
        # KIP-253
        self.ordering_barrier = ordering_barrier
        self.metadata_max_age = metadata_max_age_ms / 1000
        self._next_metadata = 0.0
        self._ordering = OrderingBarrier(self.pool, self.metadata, group_id, self.retry_backoff)
        self._joined_md: dict[str, tuple] = {}
        self._refresh_before_join = False
        self._take_start = 0

    # ------------------------------------------------------------------ assignment
    def subscribe(self, topics: Iterable[str], listener: Any = None,
                  partition_key_listener: Any = None) -> None:
        """Group-managed assignment of `topics` (needs group_id). `listener` may define
        on_partitions_revoked(tps) / on_partitions_assigned(tps), sync or async;
        `partition_key_listener` (KIP-253, a PartitionKeyRebalanceListener) may define
        on_partition_key_maybe_revoked(tps) / on_partition_key_assigned(tps)."""
        if self.group_id is None:
            raise Errors.IllegalStateError("subscribe needs a group_id; use assign() without one")
        self._subscription = sorted(set(topics))
        self._listener = listener
        self._ordering.key_listener = partition_key_listener
        self.metadata.add_topics(self._subscription)
        self._rejoin = True
        self._ensure_started()

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Static assignment: no group join (offsets still commit to group_id if one is set)."""
        self._subscription = None
        wanted = {TopicPartition(*tp) for tp in partitions}
        self._parts = {tp: self._parts.get(tp) or PartitionState() for tp in sorted(wanted)}
        self.metadata.add_topics({tp.topic for tp in wanted})
        self._ensure_started()

    def assignment(self) -> set[TopicPartition]:
        return set(self._parts)

    def _state(self, tp) -> PartitionState:
        tp = TopicPartition(*tp)
        st = self._parts.get(tp)
        if st is None:
            raise Errors.IllegalStateError(f"{tp} is not assigned to this consumer")
        return st

    def seek(self, tp, offset: int) -> None:
        self._state(tp).seek(offset)
        self._kick()

    def seek_to_beginning(self, *tps) -> None:
        self._seek_to(EARLIEST, tps)

    def seek_to_end(self, *tps) -> None:
        self._seek_to(LATEST, tps)

    def _seek_to(self, reset, tps) -> None:
        """Position tps (none: every assigned partition) by a reset on the next fetch."""
        for tp in tps or list(self._parts):
            st = self._state(tp)
            st.seek(0)
            st.position = st.fetch_offset = None
            st.reset = reset
        self._kick()

    async def position(self, tp, timeout: float = 30.0) -> int:
        """The offset of the next record poll() returns for tp (resolving a reset first)."""
        st = self._state(tp)
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while st.position is None:
            self._raise_error()
            if loop.time() > end:
                raise Errors.KafkaTimeoutError(f"no position for {tp}")
            self._kick()
            await asyncio.sleep(0.01)
        return st.position

    def group_metadata(self) -> ConsumerGroupMetadata:
        """The group, generation and member a transactional producer's offsets commit with."""
        return ConsumerGroupMetadata(self.group_id or "", self.generation_id, self.member_id, None)

    def highwater(self, tp) -> int:
        return self._state(tp).high_watermark

    # ------------------------------------------------------------------ poll
    async def poll(self, timeout: float = 0.0) -> list[ConsumerRecord]:
        self._ensure_started()
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            self._raise_error()
            out = self._take()
            if out:
                self._kick()
                return out
            remaining = end - loop.time()
            if remaining <= 1e-6:       # a float remainder below the clock's step never elapses
                return []
            self._data.clear()
            try:
                await asyncio.wait_for(self._data.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    def _take(self) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        if self._ordering.barriers:
            self._evaluate_barriers()
        parts = list(self._parts.items())
        if parts:                   # start one partition further each time: none starves
            self._take_start = (self._take_start + 1) % len(parts)
            parts = parts[self._take_start:] + parts[:self._take_start]
        for tp, st in parts:
            gate = st.gate
            buf = st.buffer
            if buf and (st.position is None or buf[0].offset >= st.position) and (
                    gate is None or buf[-1].offset < gate):
                # The common case, taken whole: a buffer is one Fetch answer's records, in
                # offset order, so none is stale once the first is not, and the last is the
                # latest epoch.
                k = min(len(buf), self.max_poll_records - len(out))
                if k == len(buf):
                    out.extend(buf)
                    buf.clear()
                else:
                    out.extend(itertools.islice(buf, k))
                    for _ in range(k):
                        buf.popleft()
                last = out[-1]
                st.position = last.offset + 1
                if last.leader_epoch > st.last_epoch:
                    st.last_epoch = last.leader_epoch
            while st.buffer and len(out) < self.max_poll_records:
                if gate is not None and st.buffer[0].offset >= gate:
                    break
                rec = st.buffer.popleft()
                if st.position is not None and rec.offset < st.position:
                    continue
                out.append(rec)
                st.position = rec.offset + 1
                if rec.leader_epoch > st.last_epoch:
                    st.last_epoch = rec.leader_epoch
            if len(out) >= self.max_poll_records:
                break
        return out

    def _refused(self, e: BaseException | None) -> None:
        """The broker refused our SASL (at connect or re-authentication): poll() raises it."""
        if isinstance(e, AuthenticationFailed):
            self._error = e
            self._data.set()

    def _raise_error(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    # ------------------------------------------------------------------ offsets
    async def commit(self, offsets: dict | None = None) -> None:
        """Commit `offsets` ({tp: offset}) or every assigned partition's position."""
        if self.group_id is None:
            raise Errors.IllegalStateError("commit needs a group_id")
        if offsets is None:
            offsets = {tp: st.position for tp, st in self._parts.items()
                       if st.position is not None}
        offsets = {TopicPartition(*tp): o for tp, o in offsets.items()}
        if not offsets:
            return
        await self._commit(offsets)

    async def committed(self, tp) -> int | None:
        tp = TopicPartition(*tp)
        return (await self._offset_fetch([tp])).get(tp)

    # ------------------------------------------------------------------ lifecycle
    async def close(self, timeout: float = 10.0) -> None:
        if self._closed:
            return
        self._stopping = True
        try:
            if self._task is not None:
                await cancel_and_wait(self._task)
            if self.group_id is not None and self._parts and self.enable_auto_commit:
                try:
                    await asyncio.wait_for(self.commit(), timeout)
                except Exception as e:  # noqa: BLE001
                    log.debug("final commit failed: %r", e)
            if self._subscription is not None and self.member_id:
                try:
                    await asyncio.wait_for(self._leave_group(), timeout)
                except Exception as e:  # noqa: BLE001
                    log.debug("LeaveGroup failed: %r", e)
        finally:
            self._closed = True
            for t in self._fetch_timers.values():
                t.cancel()
            self._close_connections()

    def _ensure_started(self) -> None:
        if self._closed:
            raise Errors.IllegalStateError("consumer is closed")
        if self._task is None:
            self._wake = asyncio.Event()
            self._data = asyncio.Event()
            self.metadata.on_update(self._kick)
            self.pool.on_ready(self._kick)
            self._task = asyncio.get_running_loop().create_task(self._run(), name="consumer-loop")

    def _kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # ------------------------------------------------------------------ the driver task
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        self._next_commit = loop.time() + self.auto_commit_interval
        while not self._stopping:
            self._wake.clear()
            try:
                if loop.time() >= self._next_metadata:
                    self._next_metadata = loop.time() + self.metadata_max_age
                    self.metadata.request_update()
                if self._subscription is not None and self._joined and not self._rejoin and \
                        self._md_snapshot() != self._joined_md:
                    log.debug("%s: subscribed topics changed, rejoining", self.member_id)
                    self._rejoin = True
                if self._subscription is not None and (self._rejoin or not self._joined):
                    await self._rejoin_group()
                    continue
                if self._subscription is not None and self._coordinator is None:
                    await self._ensure_coordinator()
                await self._resolve_positions()
                if self._ordering.barriers:
                    if await self._ordering.prepare(loop.time(), self._parts):
                        self._evaluate_barriers()
                self._send_fetches()
                delay = 0.2
                if self._subscription is not None:
                    delay = min(delay, self._maybe_heartbeat(loop.time()))
                    if self.ordering_barrier and self._joined:
                        if loop.time() >= self._ordering.next_exchange:
                            self._ordering.next_exchange = loop.time() + self.heartbeat_interval
                            await self._exchange_positions()
                        delay = min(delay, max(0.0, self._ordering.next_exchange - loop.time()))
                if self.enable_auto_commit:
                    if loop.time() >= self._next_commit:
                        self._next_commit = loop.time() + self.auto_commit_interval
                        await self._auto_commit()
                    delay = min(delay, max(0.0, self._next_commit - loop.time()))
            except asyncio.CancelledError:
                raise
            except Errors.KafkaError as e:
                if isinstance(e, (Errors.OffsetOutOfRangeError, Errors.GroupAuthorizationFailedError,
                                  Errors.TopicAuthorizationFailedError)) or not e.retriable:
                    log.debug("consumer error: %r", e)
                    if not isinstance(e, (Errors.KafkaConnectionError, Errors.NodeNotReadyError)):
                        self._error = e
                        self._data.set()
                await asyncio.sleep(self.retry_backoff)
                continue
            except AuthenticationFailed as e:      # the broker refused our SASL: poll() says so
                self._refused(e)
                await asyncio.sleep(self.retry_backoff)
                continue
            except (ConnectionError, asyncio.TimeoutError, OSError) as e:
                log.debug("consumer loop: %r", e)
                await asyncio.sleep(self.retry_backoff)
                continue
            if self._wake.is_set():
                continue
            try:
                await asyncio.wait_for(self._wake.wait(), max(delay, 0.001))
            except asyncio.TimeoutError:
                pass

    async def _auto_commit(self) -> None:
        offsets = {tp: st.position for tp, st in self._parts.items()
                   if st.position is not None and st.position != st.committed}
        if offsets:
            try:
                await self._commit(offsets)
            except Errors.KafkaError as e:
                log.debug("auto commit failed: %r", e)

    # ------------------------------------------------------------------ positions
    async def _resolve_positions(self) -> None:
        missing = [tp for tp, st in self._parts.items() if st.position is None and st.reset is None]
        if missing:
            committed = await self._offset_fetch(missing) if self.group_id is not None else {}
            for tp in missing:
                st = self._parts.get(tp)
                if st is None or st.position is not None:
                    continue
                if tp in committed:
                    st.position = st.fetch_offset = committed[tp]
                    st.committed = committed[tp]
                elif self.auto_offset_reset == "none":
                    raise Errors.NoOffsetForPartitionError(f"no committed offset for {tp}")
                else:
                    st.reset = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
        resets = {tp: st.reset for tp, st in self._parts.items() if st.reset is not None}
        if resets:
            epochs = {tp: self._parts[tp].epoch for tp in resets}
            offsets = await list_offsets(self.pool, self.metadata, resets, self.isolation_level,
                                         timeout=self.pool.request_timeout)
            for tp, (offset, _) in offsets.items():
                st = self._parts.get(tp)
                if st is not None and st.reset is not None and st.epoch == epochs[tp]:
                    st.seek(offset)

    # ------------------------------------------------------------------ fetching
    def _send_fetches(self) -> None:
        by_node: dict[int, list[tuple[TopicPartition, PartitionState]]] = \
            collections.defaultdict(list)
        now = asyncio.get_running_loop().time()
        for tp, st in self._parts.items():
            if st.fetch_offset is None or st.reset is not None or st.inflight or st.buffer:
                continue
            if st.backoff_until > now or (st.gate is not None and st.fetch_offset >= st.gate):
                continue
            leader = self.metadata.leader(tp.topic, tp.partition)
            if leader < 0:
                # No leader (or the partition was removed): look again after a backoff, not on
                # every metadata update (each would start the next refresh at once).
                st.backoff_until = now + self.retry_backoff
                self.metadata.request_update(tp.topic)
                continue
            if leader in self._node_fetching:
                continue
            by_node[leader].append((tp, st))
        for node, parts in by_node.items():
            conn = self.pool.get_nowait(node)
            if conn is None:
                if self.pool.connect_failed(node):     # leader unreachable: it may have moved
                    self._refused(self.pool.auth_failure(node))
                    for tp, st in parts:
                        # Look again after a backoff: metadata may still name this leader, and
                        # each refresh would otherwise start the next one at once.
                        st.backoff_until = now + self.retry_backoff
                        self.metadata.request_update(tp.topic)
                continue
            self._send_fetch(node, conn, parts)

    def _send_fetch(self, node: int, conn, parts) -> None:
        version = self.pool.version(conn, FetchRequestKip253, lo=4, hi=12)
        cls = FetchRequestKip253
        topics: dict[str, list] = collections.defaultdict(list)
        sent = []
        for tp, st in parts:
            topics[tp.topic].append(cls.FetchTopic.FetchPartition(
                partition=tp.partition,
                current_leader_epoch=self.metadata.leader_epoch(tp.topic, tp.partition),
                fetch_offset=st.fetch_offset, last_fetched_epoch=-1, log_start_offset=-1,
                partition_max_bytes=self.max_partition_fetch_bytes))
            st.inflight = True
            sent.append((tp, st, st.epoch, st.fetch_offset))
        ftopics = []
        for name, ps in topics.items():
            md = self.metadata.topic(name)
            ftopics.append(cls.FetchTopic(topic=name, partitions=ps,
                                          undeleted_partition_count=md.undeleted_partition_count
                                          if md else -1))
        req = cls(replica_id=-1, max_wait_ms=self.fetch_max_wait_ms,
                  min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes,
                  isolation_level=self.isolation_level, session_id=0, session_epoch=-1,
                  topics=ftopics, forgotten_topics_data=[], rack_id="")
        self._node_fetching.add(node)
        fut = conn.send(req, version, response_class=FetchResponse)
        timer = asyncio.get_running_loop().call_later(
            self.pool.request_timeout + self.fetch_max_wait_ms / 1000,
            lambda: None if fut.done() else conn.close("fetch timed out"))
        fut.add_done_callback(lambda f: self._on_fetch(node, sent, f, timer))

    def _on_fetch(self, node: int, sent, fut: asyncio.Future, timer) -> None:
        timer.cancel()
        self._node_fetching.discard(node)
        for _, st, _, _ in sent:
            st.inflight = False
        self._kick()
        if not fut.cancelled():
            fut.exception()                   # retrieved, even when closing
        if self._closed or self._stopping:
            return
        if fut.cancelled() or fut.exception() is not None:
            self._refused(None if fut.cancelled() else fut.exception())
            self.pool.close_node(node, "fetch failed")
            for t in {tp.topic for tp, _, _, _ in sent}:
                self.metadata.request_update(t)
            return
        resp = fut.result()
        if resp.error_code:
            log.debug("fetch from %s: error %s", node, resp.error_code)
            return
        index = {(tp.topic, tp.partition): (tp, st, epoch, offset) for tp, st, epoch, offset in sent}
        got_data = False
        for t in resp.responses:
            for p in t.partitions:
                entry = index.get((t.topic, p.partition_index))
                if entry is None:
                    continue
                tp, st, epoch, offset = entry
                if self._parts.get(tp) is not st or st.epoch != epoch or st.fetch_offset != offset:
                    continue                       # reassigned or seeked meanwhile
                if p.error_code == 0:
                    st.high_watermark = p.high_watermark
                    try:
                        recs, next_offset = decode_records(tp.topic, tp.partition, p.records, offset)
                        if self.isolation_level and p.aborted_transactions and recs:
                            recs = drop_aborted(recs, p.records, p.aborted_transactions)
                    except Errors.KafkaError as e:
                        self._error = e
                        self._data.set()
                        continue
                    st.fetch_offset = next_offset
                    if recs:
                        st.buffer.extend(recs)
                        got_data = True
                elif p.error_code == Errors.OffsetOutOfRangeError.errno:
                    if self.auto_offset_reset == "none":
                        self._error = Errors.OffsetOutOfRangeError(f"{tp} offset {offset}")
                        self._data.set()
                    else:
                        st.position = st.fetch_offset = None
                        st.reset = EARLIEST if self.auto_offset_reset == "earliest" else LATEST
                        self._ordering.restart(tp, st)     # KIP-253: look it up again
                elif p.error_code in REFRESH_ERRORS:
                    # Not again before a backoff: an immediate refetch gets the same answer
                    # (a removed partition, a moved leader) and starves everything else.
                    st.backoff_until = asyncio.get_running_loop().time() + self.retry_backoff
                    self.metadata.request_update(tp.topic)
                elif p.error_code == INVALID_PARTITION_METADATA:
                    # KIP-253: our undeleted partition count is not the leader's: refresh, rejoin.
                    st.backoff_until = asyncio.get_running_loop().time() + self.retry_backoff
                    self.metadata.request_update(tp.topic)
                    if self._subscription is not None and not self._rejoin:
                        self._rejoin = True
                        self._refresh_before_join = True
                else:
                    st.backoff_until = asyncio.get_running_loop().time() + self.retry_backoff
                    log.debug("fetch %s: error %s", tp, p.error_code)
        if got_data:
            self._data.set()

    def _evaluate_barriers(self) -> None:
        opened = self._ordering.evaluate(self._parts)
        if opened:
            asyncio.get_running_loop().create_task(
                self._ordering.call_key_listener("on_partition_key_assigned", opened))
            self._kick()

    async def _exchange_positions(self) -> None:
        node = self._coordinator
        if node is None:
            return
        try:
            code = await self._ordering.exchange_positions(node, self.generation_id,
                                                           self.member_id, self._parts)
        except (ConnectionError, asyncio.TimeoutError, Errors.KafkaError) as e:
            log.debug("ConsumerGroupPosition: %r", e)
            self._coordinator_dead(node)
            return
        if code:
            if code in REJOIN_ERRORS:
                self._need_rejoin(code)
            elif code in COORDINATOR_ERRORS:
                self._coordinator_dead(node)
            return
        if self._ordering.barriers:
            self._evaluate_barriers()
            self._kick()
            if self._data is not None:
                self._data.set()
