"""The partitions a broker hosts, as leader or follower, and the background work around them.

Owns: partition state changes from LeaderAndIsr / StopReplica, the leader's append path
(`append_records`: Produce), the reads of the log (`fetch_records`: Fetch, `list_offset`:
ListOffsets, `end_offset_for_epoch`: OffsetForLeaderEpoch), the replica fetchers of follower
partitions, ISR shrinking, and log retention. Handlers call in here and only translate requests
and answers; nobody else reaches into PartitionLog. The produce and fetch paths build their
wire-ready per-partition results (protocol.produce_response / protocol.fast) directly: one
method call per request, no per-batch translation layer.

A ReplicaManager is given what it uses (node id, config, clock, the metadata cache, the
controller's AlterPartition, the broker's log.* defaults), not the Broker.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import uuid
from collections.abc import Iterable
from typing import Callable, Protocol

from kafka.errors import (FencedLeaderEpochError, InvalidRecordError, InvalidTopicError, KafkaError,
                          NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                          NotLeaderForPartitionError, OffsetNotAvailableError,
                          OffsetOutOfRangeError, PolicyViolationError, RequestTimedOutError,
                          StaleControllerEpochError, UnknownLeaderEpochError,
                          UnknownTopicOrPartitionError)

from minibroker.broker.fetch_session import QUIET_REFRESH_MS, FollowerWaker
from minibroker.broker.fetcher import ReplicaFetcher
from minibroker.broker.first_fetch import WAKE, FirstFetches
from minibroker.metadata.cache import MetadataCache
from minibroker.broker.partition import Partition
from minibroker.broker.stats import BrokerStats
from minibroker.broker.throttle import ReplicationThrottle
from minibroker.protocol.topic_names import INTERNAL_TOPICS
from minibroker.clock import Clock
from minibroker.config import ClusterConfig
from minibroker.log import cleaner
from minibroker.log.batch import build_control_batch, next_offset
from minibroker.log.config import LogConfig
from minibroker.log.log_manager import LogManager
from minibroker.log.memory import LogMemory
from minibroker.log.partition_log import PartitionLog
from minibroker.log.producer_state import ProducerStateEntry
from minibroker.network.partitions import NetworkPartitions
from minibroker.protocol.errors import INVALID_PARTITION_METADATA
from minibroker.protocol.fast import FetchPartition
from minibroker.protocol.framing import adoption, frame_records
from minibroker.protocol.produce_response import PartitionResult

log = logging.getLogger("minibroker.replica")

_BATCH_LENGTH = struct.Struct(">i")
EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
DEBUGGING_REPLICA_ID = -2
# A partition without data carries empty records, never null: Kafka sends MemoryRecords.EMPTY, and
# librdkafka fails the whole response on a null ("invalid MessageSetSize -1") and fetches again at
# once, in a tight loop for as long as the error lasts.
NO_RECORDS = ()


class AlterPartitionSender(Protocol):
    """The one controller call a replica manager makes (cluster.ControllerChannel has it)."""

    async def alter_partition(self, broker_id: int, topic: str, partition: int,
                              leader_epoch: int, partition_epoch: int,
                              new_isr: tuple[int, ...]) -> int: ...


def fetch_error(index: int, code: int, high_watermark: int = -1,
                log_start_offset: int = -1) -> FetchPartition:
    return FetchPartition(index, code, high_watermark, -1, log_start_offset, NO_RECORDS)


def _end_of(records) -> int:
    """The offset after the last of these stored batches (base offset + last offset delta + 1)."""
    return next_offset(records[-1])


def _idle(p: Partition, sp, follower: bool, isolation_level: int) -> bool:
    """Nothing to read at a session partition's fetch offset, and its high watermark, last stable
    offset and log start offset are as the session last sent them. A follower also fetches at
    our latest epoch or none (an empty log): then its log cannot have diverged from ours."""
    plog = p.log
    if follower:
        if sp.fetch_offset != plog.log_end_offset:
            return False
        epoch = sp.last_fetched_epoch
        if epoch != -1 and epoch != plog.epochs.latest_epoch:
            return False
    hw = p.high_watermark
    # The LSO is the HW unless a transaction is open or undecided below it (inlined: a follower's
    # session visits every partition it shares with us twice per fetch).
    lso = p.last_stable_offset() if plog.producers.ongoing or plog.txn_index.unreplicated else hw
    if not follower and sp.fetch_offset != (lso if isolation_level else hw):
        return False
    sent = sp.sent
    return sent[0] == hw and sent[1] == lso and sent[2] == plog.log_start_offset


def _mark_quiet(idle, session, replica_id: int) -> None:
    """A follower's session partitions found idle (Partition, SessionPartition, its `changes`
    then) become quiet: skipped until their counter moves, their long poll registered with the
    session's waker, their follower caught up at each of the session's fetches meanwhile. Not
    one whose follower is out of the ISR: its fetches are what expands the ISR."""
    waker = session.waker
    for p, sp, seen in idle:
        f = p.followers.get(replica_id)
        if f is None or replica_id not in p.isr:
            continue
        sp.quiet, sp.quiet_partition, sp.quiet_follower = seen, p, f
        f.quiet_in = session
        p.add_data_waiter(waker, replica_id)


def _time_out(futs) -> None:
    for fut in futs:
        if not fut.done():
            fut.set_result(RequestTimedOutError.errno)


def _wake(fut) -> None:
    if not fut.done():
        fut.set_result(None)


class ReplicaManager:
    def __init__(self, node_id: int, config: ClusterConfig, clock: Clock,
                 metadata: MetadataCache, controller: AlterPartitionSender,
                 log_defaults: LogConfig,
                 log_factory: Callable[[str, int, LogConfig, uuid.UUID], PartitionLog] | None = None,
                 stats: BrokerStats | None = None,
                 throttle: ReplicationThrottle | None = None,
                 network: NetworkPartitions | None = None,
                 data_dir: str | None = None) -> None:
        """log_factory(topic, partition, config, topic id): a hosted partition's new log; by
        default an in-memory PartitionLog counted in (and capped by) this broker's log memory,
        or, given `data_dir`, one on disk there (log/log_manager.py). network: the inter-broker
        links replica fetchers connect through (network partitions)."""
        self.node_id = node_id
        # Counters the metrics exporter reads (bytes in/out, ISR changes): plain integers.
        self.stats = stats if stats is not None else BrokerStats()
        # Replication quotas of partition moves (leader side here, follower side in fetchers).
        self.throttle = throttle if throttle is not None else ReplicationThrottle(
            node_id, clock.monotonic)
        self.config = config
        self.clock = clock
        self.network = network      # inter-broker links (replica fetchers connect through it)
        self.metadata = metadata
        self.controller = controller
        # Topic configs not set on a topic default to the broker's log.* configs (Kafka's synonyms).
        self.log_defaults = log_defaults
        self.running = False
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.controller_epoch = -1
        self.topic_undeleted_counts: dict[str, int] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._tasks: list[asyncio.Task] = []
        # Bytes held by this broker's logs, capped by log.memory.max.bytes (minibroker.log.memory).
        self.log_memory = LogMemory(config.log_memory_max_bytes, config.log_memory_overflow)
        # Followers yet to fetch a partition we newly lead, and their waiting fetches.
        self.first_fetches = FirstFetches()
        self.log_manager = None if data_dir is None else LogManager(data_dir, clock, self.log_memory)
        self.new_log = log_factory or (self._memory_log if self.log_manager is None
                                       else self.log_manager.open_log)

    def _memory_log(self, topic: str, partition: int, config: LogConfig,
                    topic_id: uuid.UUID) -> PartitionLog:
        return PartitionLog(topic, partition, config, self.clock, memory=self.log_memory)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.running = True
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._isr_shrink_loop()),
                       loop.create_task(self._retention_loop())]
        if self.config.log_cleaner_enable:
            self._tasks.append(loop.create_task(self._cleaner_loop()))
        if self.log_manager is not None:
            self._tasks.append(loop.create_task(self._checkpoint_loop()))

    async def stop(self) -> None:
        self.running = False
        for t in self._tasks:
            t.cancel()
        for f in list(self.fetchers.values()):
            await f.stop()
        self.fetchers.clear()
        for p in self.partitions.values():
            p.fail_waiters(NotLeaderForPartitionError.errno)
            p.notify_data()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.log_manager is not None:
            self.log_manager.close()
        self.log_memory.close()         # its spill directory (log/spill.py)

    # ------------------------------------------------------------------ lookups
    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    def leader_partition(self, topic: str, partition: int, current_leader_epoch: int = -1,
                         leader_only: bool = True) -> tuple[Partition | None, int]:
        """The partition if we lead it (or, leader_only=False, host it) and the client's epoch
        matches, else an error code."""
        p = self.partitions.get((topic, partition))
        if p is None:
            known = self.metadata.partition(topic, partition) is not None
            return None, (NotLeaderForPartitionError.errno if known
                          else UnknownTopicOrPartitionError.errno)
        if current_leader_epoch >= 0:
            err = self.check_epoch(p, current_leader_epoch)
            if err:
                return None, err
        if leader_only and p.leader != self.node_id:
            return None, NotLeaderForPartitionError.errno
        return p, 0

    @staticmethod
    def check_partition_metadata(p: Partition, undeleted_partition_count: int,
                                 producing: bool) -> int:
        """KIP-253: a client's undeleted partition count must equal the leader's (from the latest
        LeaderAndIsr), newer or older; -1 is a legacy client and is not compared. Writes into a
        partition marked for deletion are refused for every producer, legacy ones included: it
        must drain, and a write there could be delivered after a newer record of its key."""
        if not p.log.config.enable_ordered_delivery:
            return 0
        if undeleted_partition_count >= 0 and \
                undeleted_partition_count != p.undeleted_partition_count:
            return INVALID_PARTITION_METADATA
        if producing and p.leader_epoch_before_deletion:
            return INVALID_PARTITION_METADATA
        return 0

    @staticmethod
    def check_epoch(p: Partition, current_leader_epoch: int) -> int:
        if current_leader_epoch < 0 or current_leader_epoch == p.leader_epoch:
            return 0
        if current_leader_epoch < p.leader_epoch:
            return FencedLeaderEpochError.errno
        return UnknownLeaderEpochError.errno

    def delete_records(self, topic: str, partition: int, offset: int) -> tuple[int, int]:
        """DeleteRecords on the leader: move the log start offset up to `offset` (-1: the high
        watermark), never past the high watermark. Returns (low_watermark, error_code); followers
        follow through the log_start_offset of their fetch responses."""
        p, err = self.leader_partition(topic, partition)
        if err:
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

    # ------------------------------------------------------------------ the group coordinator's log
    def append_coordinator_batch(self, topic: str, partition: int, leader_epoch: int,
                                 batch: bytes, now_ms: int) -> asyncio.Future:
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
                         ) -> asyncio.Future | int:
        """WriteTxnMarkers on a partition we lead: append the control batch; a future of 0 once
        the high watermark passed it, else an error code now."""
        p, err = self.leader_partition(topic, partition)
        if err:
            return err
        batch = build_control_batch(commit, producer_id, producer_epoch,
                                    coordinator_epoch=coordinator_epoch, timestamp=now_ms)
        try:
            return self.append_coordinator_batch(topic, partition, p.leader_epoch, batch, now_ms)
        except KafkaError as e:
            return e.errno

    def in_ongoing_txn(self, topic: str, partition: int, producer_id: int) -> bool:
        """We lead the partition and the producer's transaction is open there (KIP-890)."""
        p = self.partitions.get((topic, partition))
        return p is not None and p.is_leader and producer_id in p.log.producers.ongoing

    def describe_producers(self, topic: str, partition: int
                           ) -> tuple[int, list[ProducerStateEntry]]:
        """DescribeProducers: (error code, the active producers of a partition we lead)."""
        p, err = self.leader_partition(topic, partition)
        if err:
            return err, []
        return 0, p.log.producers.entries()

    def log_sizes(self, wanted: Iterable[tuple[str, int]] | None) -> list[tuple[str, int, int]]:
        """DescribeLogDirs: (topic, partition, bytes stored) of each hosted partition (of
        `wanted`, None: all), sorted."""
        keys = sorted(self.partitions if wanted is None else set(wanted) & set(self.partitions))
        return [(t, i, self.partitions[(t, i)].log.size_bytes) for t, i in keys]

    def log_range(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start offset, log end offset) of a hosted partition."""
        log = self.partitions[(topic, partition)].log
        return log.log_start_offset, log.log_end_offset

    def read_batches(self, topic: str, partition: int, offset: int, max_bytes: int,
                     max_offset: int) -> list:
        """Whole stored batches of a hosted partition from `offset`, each below `max_offset`
        (a coordinator loading its partition)."""
        return self.partitions[(topic, partition)].log.read(offset, max_bytes,
                                                            max_offset=max_offset).records

    # ------------------------------------------------------------------ Produce: the leader's append
    def append_records(self, topics, acks: int, internal_topics_allowed: bool = False
                       ) -> tuple[dict[str, list], list]:
        """Append each partition's batch as leader (Kafka's ReplicaManager.appendRecords), for
        acks 0, 1 or -1. `topics` are protocol.fast's decoded Produce topics. Per partition:
        leadership and KIP-253 checks, min.insync.replicas, one batch only, the append, the high
        watermark, retention.bytes, the broker's log memory cap, and a wake-up of waiting fetches.
        Returns the per-topic PartitionResults and, for acks=-1, the (result, future, partition)
        of each batch the high watermark has yet to reach: `await_replication` waits for them.
        Internal topics are written by their coordinators only: a client's batch there is
        INVALID_TOPIC_EXCEPTION "Cannot append to internal topic" (Kafka lets client.id
        "__admin_client" through; no client gets through here)."""
        results: dict[str, list] = {}
        waits = []
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
                if err:
                    out.append(PartitionResult(pd.index, err))
                    continue
                # KIP-253's checks can only fail for a client that sends its partition count, or
                # on a partition marked for deletion (the call is skipped on the common path).
                if td.undeleted_partition_count >= 0 or p.leader_epoch_before_deletion:
                    err = self.check_partition_metadata(p, td.undeleted_partition_count,
                                                        producing=True)
                duplicate = None
                if err:
                    # A retry of a batch this log already holds is answered with its offsets,
                    # whatever the count now: else the client, told "stale", partitions its
                    # records again under sequence numbers the log has, and a later batch with
                    # those numbers is taken for the duplicate and acknowledged at wrong offsets.
                    duplicate = p.log.duplicate_of(pd.records or b"")
                    if duplicate is None:
                        out.append(PartitionResult(pd.index, err, error_message=(
                            f"undeleted_partition_count {td.undeleted_partition_count} != "
                            f"{p.undeleted_partition_count}, or the partition is marked for "
                            "deletion")))
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
    async def await_replication(waits: list, timeout_ms: int) -> None:
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

    # ------------------------------------------------------------------ Fetch: reading the log
    async def fetch_records(self, items, replica_id: int, max_wait_ms: int, min_bytes: int,
                            max_bytes: int, isolation_level: int, incremental: bool = False,
                            session=None) -> dict[str, list]:
        """Read for a consumer (replica_id -1) or a follower (>= 0; its fetch offsets move the
        high watermark), Kafka's fetchMessages: `items` are (topic, FetchPartition of the request,
        undeleted partition count). Long-polls up to max_wait_ms until min_bytes are readable,
        woken by appends / HW moves. Returns protocol.fast FetchPartitions per topic.
        `incremental`: the items are an incremental fetch session's SessionPartitions; one with
        nothing to read and nothing new to say since the session's last answer is only waited
        on, not answered (the handler would drop its answer): a follower's session holds every
        partition it shares with us, and one write moves one of them.
        `session`: a follower's fetch session. Its partitions found idle are marked quiet and
        skipped by its next fetches (no visit, no bookkeeping: see fetch_session.py) until their
        `changes` counter or log start moves or the follower names them; once a second it visits
        them all. Their long polls stay registered with the session's FollowerWaker, and the ISR
        reads their caught-up time from the session (FollowerState.quiet_in)."""
        follower = replica_id >= 0
        now = self.clock.now_ms()
        loop = asyncio.get_running_loop()
        marks = session if follower else None       # where idle partitions are marked quiet
        skip = marks is not None and incremental and now < marks.full_visit_ms
        if marks is not None and not skip:
            marks.full_visit_ms = now + QUIET_REFRESH_MS
        # Resolve partitions and record follower progress once, before any waiting.
        plan = []
        quiet = 0           # partitions skipped: waited on through the session's waker
        partitions, node_id = self.partitions, self.node_id
        for topic, fp, undeleted_partition_count in items:
            if skip and fp.quiet >= 0:
                qp = fp.quiet_partition
                if fp.quiet == qp.changes and qp.log.log_start_offset == fp.sent[2]:
                    quiet += 1      # nothing to say of it, and the follower has it all
                    continue
                fp.quiet = -1
            # leader_partition inlined for the common case (a follower's session visits every
            # partition it shares with us on each fetch); it still answers every other one.
            p = partitions.get((topic, fp.partition))
            epoch = fp.current_leader_epoch
            if p is not None and p.leader == node_id and (epoch < 0 or epoch == p.leader_epoch):
                err = 0
            else:
                p, err = self.leader_partition(topic, fp.partition, epoch)
            if not err and not follower:
                err = self.check_partition_metadata(p, undeleted_partition_count, producing=False)
            if not err and follower:
                p.update_follower_fetch(replica_id, fp.fetch_offset, now)
            plan.append((topic, fp, p, err))
        if marks is not None:
            marks.quiet_fetch_ms = now      # the skipped partitions' follower was caught up now
        max_wait_ms = max(max_wait_ms, 0)
        min_bytes = min(min_bytes, max_bytes)
        if follower:
            max_wait_ms = self.first_fetches.max_wait_ms(replica_id, max_wait_ms)
        deadline = loop.time() + max_wait_ms / 1000
        leader_quota = self.throttle.leader
        while True:
            results: dict[str, list] = {}
            sizes: dict[str, int] = {}      # bytes returned per topic, for the broker's counters
            total = 0
            errors = False
            remaining = max_bytes
            waiters = []
            idle = []
            for topic, fp, p, err in plan:
                if incremental and not err and fp.sent is not None and _idle(p, fp, follower,
                                                                             isolation_level):
                    waiters.append(p)
                    if marks is not None:
                        idle.append((p, fp, p.changes))
                    continue
                out = results.setdefault(topic, [])
                if err:
                    out.append(fetch_error(fp.partition, err))
                    errors = True
                    continue
                plog = p.log
                div = self._diverging(p, fp.last_fetched_epoch, fp.fetch_offset) \
                    if follower else None
                if div is not None:
                    out.append(FetchPartition(fp.partition, 0, p.high_watermark,
                                              p.last_stable_offset(), plog.log_start_offset,
                                              NO_RECORDS, div))
                    errors = True
                    continue
                max_offset = plog.log_end_offset if follower else (
                    p.last_stable_offset() if isolation_level else p.high_watermark)
                if not plog.log_start_offset <= fp.fetch_offset <= plog.log_end_offset:
                    out.append(fetch_error(fp.partition, OffsetOutOfRangeError.errno,
                                           p.high_watermark, plog.log_start_offset))
                    errors = True
                    continue
                records = ()
                throttled = follower and leader_quota.rate is not None \
                    and self.throttle.leader_throttled(p, replica_id)
                if throttled and leader_quota.exceeded():
                    waiters.append(p)       # over the leader quota: no data now, as if none
                elif fp.fetch_offset < max_offset and remaining > 0:
                    r = plog.read(fp.fetch_offset, min(fp.partition_max_bytes, remaining),
                                  max_offset, min_one=(total == 0))
                    if r.size:
                        records = r.records
                        total += r.size
                        remaining -= r.size
                        sizes[topic] = sizes.get(topic, 0) + r.size
                        if throttled:
                            leader_quota.record(r.size)
                else:
                    waiters.append(p)
                if isolation_level and not follower:
                    # read_committed: the aborted transactions with records in what was read
                    # (clients drop those records); the read itself stopped at the LSO.
                    aborted = plog.aborted_transactions(fp.fetch_offset, _end_of(records)) \
                        if records else []
                    out.append(FetchPartition(fp.partition, 0, p.high_watermark, max_offset,
                                              plog.log_start_offset, records,
                                              aborted_transactions=aborted))
                    continue
                out.append(FetchPartition(fp.partition, 0, p.high_watermark, p.last_stable_offset(),
                                          plog.log_start_offset, records))
            timeout = deadline - loop.time()
            # A float remainder below the clock's resolution would re-arm a timer that never moves
            # the (virtual) clock: treat it as elapsed.
            if total >= min_bytes or errors or timeout <= 1e-6 or not (waiters or quiet) \
                    or not self.running:
                if total:
                    self._count_bytes_out(follower, sizes)
                if idle:
                    _mark_quiet(idle, marks, replica_id)
                return results
            # One future for every partition waited on: the first append / HW move resolves it and
            # this task resumes in the next loop pass (no asyncio.wait hop); a timer ends the wait.
            fut = loop.create_future()
            if follower:
                waker = marks.waker if marks is not None else FollowerWaker()
                waker.fut = fut
                waker.woken = []
                for p in waiters:
                    p.add_data_waiter(waker, replica_id)
            else:
                for p in waiters:
                    p.add_data_waiter(fut)
            timer = loop.call_later(timeout, _wake, fut)
            if follower:
                self.first_fetches.waiting(replica_id, fut)
            try:
                woken_by = await fut
            finally:
                timer.cancel()
                if not fut.done():
                    fut.cancel()
                if follower:
                    if waker.fut is fut:
                        waker.fut = None
                    self.first_fetches.done_waiting(replica_id, fut)
            if woken_by is WAKE:
                if total:
                    self._count_bytes_out(follower, sizes)
                if idle:
                    _mark_quiet(idle, marks, replica_id)
                return results      # we lead a new partition of this follower: let it fetch that too
            if quiet and waker.woken:
                quiet -= self._visit_woken(waker.woken, marks, plan, replica_id, now)

    def _visit_woken(self, woken: list, session, plan: list, replica_id: int, now: int) -> int:
        """A parked follower fetch woken by partitions it skipped as quiet visits them now, as
        if it had not skipped them (fetch_records' plan). Returns how many."""
        n = 0
        for q in woken:
            sp = session.partitions.get((q.topic, q.partition))
            if sp is None or sp.quiet < 0:
                continue            # visited already (or since forgotten)
            sp.quiet = -1
            n += 1
            p, err = self.leader_partition(q.topic, q.partition, sp.current_leader_epoch)
            if not err:
                p.update_follower_fetch(replica_id, sp.fetch_offset, now)
            plan.append((q.topic, sp, p, err))
        return n

    def _count_bytes_out(self, follower: bool, sizes: dict[str, int]) -> None:
        """Kafka's BytesOut (consumers, per topic) and ReplicationBytesOut (followers)."""
        if follower:
            self.stats.replication_bytes_out += sum(sizes.values())
            return
        for topic, n in sizes.items():
            self.stats.topics[topic].bytes_out += n

    @staticmethod
    def _diverging(p: Partition, last_fetched_epoch: int, fetch_offset: int):
        """KIP-320: where a follower's log diverged from ours, as (epoch, end offset), or None."""
        if last_fetched_epoch < 0:
            return None
        epoch, end_offset = p.log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return (epoch, end_offset)
        return None

    # ------------------------------------------------------------------ ListOffsets, OffsetForLeaderEpoch
    def list_offset(self, topic: str, partition: int, current_leader_epoch: int, timestamp: int,
                    isolation_level: int, replica_id: int) -> tuple[int, int, int, int]:
        """ListOffsets for one partition: (error code, offset, timestamp, leader epoch).
        replica_id -2 (debugging) and >= 0 get the log end offset for LATEST; consumers the HW.
        As Kafka's fetchOnlyFromLeader, -2 is answered by any replica (a follower's own log)."""
        p, err = self.leader_partition(topic, partition, current_leader_epoch,
                                       leader_only=replica_id != DEBUGGING_REPLICA_ID)
        if err:
            return err, -1, -1, -1
        if timestamp == LATEST and p.is_leader and p.high_watermark < p.leader_epoch_start_offset:
            # KIP-207: a new leader's HW may lag the previous leader's; don't answer low.
            return OffsetNotAvailableError.errno, -1, -1, -1
        offset, ts = self._lookup(p, timestamp, isolation_level, replica_id)
        epoch = p.log.epochs.epoch_for_offset(offset) if offset >= 0 else -1
        return 0, offset, ts, epoch if epoch is not None else -1

    @staticmethod
    def _lookup(p: Partition, ts: int, isolation_level: int, replica_id: int) -> tuple[int, int]:
        plog = p.log
        if ts in (EARLIEST, EARLIEST_LOCAL):
            return plog.log_start_offset, -1
        if ts == LATEST and (replica_id >= 0 or replica_id == DEBUGGING_REPLICA_ID):
            return plog.log_end_offset, -1          # Kafka: replicas and debugging see the LEO
        if ts == LATEST:
            return (p.last_stable_offset() if isolation_level else p.high_watermark), -1
        if ts == LATEST_TIERED:
            return -1, -1
        if ts == MAX_TIMESTAMP:
            found = plog.max_timestamp_offset()
            return (found[0], found[1]) if found else (-1, -1)
        found = plog.offset_for_timestamp(ts)
        if found is None or found[0] >= (p.last_stable_offset() if isolation_level
                                         else p.high_watermark):
            return -1, -1
        return found

    def end_offset_for_epoch(self, topic: str, partition: int, current_leader_epoch: int,
                             leader_epoch: int, any_replica: bool) -> tuple[int, int, int]:
        """OffsetForLeaderEpoch for one partition: (error code, epoch, end offset), the largest
        epoch <= leader_epoch this replica knows and where it ends (-1, -1 if none).
        any_replica: a follower answers too (the debugging replica id)."""
        if any_replica:
            p = self.partitions.get((topic, partition))
            if p is None:
                known = self.metadata.partition(topic, partition) is not None
                return (NotLeaderForPartitionError.errno if known
                        else UnknownTopicOrPartitionError.errno), -1, -1
            err = self.check_epoch(p, current_leader_epoch)
        else:
            p, err = self.leader_partition(topic, partition, current_leader_epoch)
        if err:
            return err, -1, -1
        epoch, end_offset = p.log.end_offset_for_epoch(leader_epoch)
        return 0, epoch, end_offset

    # ------------------------------------------------------------------ LeaderAndIsr
    def check_controller_epoch(self, controller_epoch: int) -> int:
        if controller_epoch < self.controller_epoch:
            return StaleControllerEpochError.errno
        self.controller_epoch = controller_epoch
        return 0

    def apply_partition_state(self, topic: str, topic_id: uuid.UUID, partition: int, leader: int,
                              leader_epoch: int, partition_epoch: int, isr, replicas,
                              undeleted_partition_count: int, configs: dict[str, str],
                              after_creation=(), before_deletion=()) -> int:
        key = (topic, partition)
        p = self.partitions.get(key)
        if p is not None and p.topic_id != topic_id:
            self._remove(key)           # a deleted and re-created topic of the same name
            p = None
        if p is None:
            config = LogConfig.from_configs(configs, defaults=self.log_defaults)
            p = Partition(self.node_id, topic, topic_id, partition,
                          self.new_log(topic, partition, config, topic_id), self.clock,
                          self.request_isr_change)
            p.high_watermark = p.log.recovered_high_watermark
            self.partitions[key] = p
        elif (leader_epoch, partition_epoch) < (p.leader_epoch, p.partition_epoch):
            return StaleControllerEpochError.errno
        if configs:
            p.log.config = LogConfig.from_configs(configs, defaults=self.log_defaults)
        self.topic_undeleted_counts[topic] = undeleted_partition_count
        p.undeleted_partition_count = undeleted_partition_count
        p.leader_epoch_after_creation = tuple(after_creation)
        p.leader_epoch_before_deletion = tuple(before_deletion)
        if leader == self.node_id:
            self._remove_from_fetcher(p)
            p.make_leader(leader_epoch, partition_epoch, isr, replicas)
            self.first_fetches.led(p)
        else:
            p.make_follower(leader, leader_epoch, partition_epoch, isr, replicas)
            self._remove_from_fetcher(p)
            if leader >= 0 and self.node_id in p.replicas:
                self._add_to_fetcher(p, leader)
        return 0

    def on_metadata_update(self, topics) -> None:
        """Configs of the topics an UpdateMetadata named reach their logs here. Only those: the
        controller propagates each created topic on its own, so rebuilding every hosted partition's
        config per request made creating T topics O(T x partitions)."""
        cache = self.metadata
        for topic in topics:
            t = cache.topics.get(topic)
            if t is None or t.configs is None:
                continue
            cfg = None              # one (frozen) LogConfig shared by the topic's partitions
            for pid in t.partitions:
                p = self.partitions.get((topic, pid))
                if p is None:
                    continue
                if cfg is None:
                    cfg = LogConfig.from_configs(t.configs, defaults=self.log_defaults)
                if cfg != p.log.config:
                    p.log.config = cfg

    def stop_replica(self, topic: str, partition: int, delete: bool) -> int:
        key = (topic, partition)
        p = self.partitions.get(key)
        if p is None:
            return 0
        self._remove_from_fetcher(p)
        p.fail_waiters(NotLeaderForPartitionError.errno)
        p.notify_data()
        if delete:
            self._remove(key)
        else:
            p.leader = -1
        return 0

    def _remove(self, key) -> None:
        p = self.partitions.pop(key, None)
        if p is not None:
            p.removed = True
            p.log.delete()          # gives its bytes back to log_memory (and its files)
            if self.log_manager is not None:
                self.log_manager.forget(p.log)
            self._remove_from_fetcher(p)
            p.fail_waiters(NotLeaderForPartitionError.errno)
            p.notify_data()

    # ------------------------------------------------------------------ fetchers
    def _add_to_fetcher(self, p: Partition, leader: int) -> None:
        f = self.fetchers.get(leader)
        if f is None:
            f = self.fetchers[leader] = ReplicaFetcher(self.node_id, leader, self.config,
                                                       self.metadata, self._on_follower_append,
                                                       self.throttle, self.network)
            f.start()
        f.add(p)

    def _on_follower_append(self, nbytes: int) -> None:
        self.stats.replication_bytes_in += nbytes
        self.log_memory.maybe_evict()

    def _remove_from_fetcher(self, p: Partition) -> None:
        for f in self.fetchers.values():
            f.remove(p)

    # ------------------------------------------------------------------ ISR
    def request_isr_change(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        if p.isr_change_in_flight or not self.running:
            return
        p.isr_change_in_flight = True
        p.pending_isr = tuple(new_isr)
        asyncio.get_running_loop().create_task(self._alter_partition(p, new_isr))

    async def _alter_partition(self, p: Partition, new_isr: tuple[int, ...]) -> None:
        before = p.isr
        try:
            code = await self.controller.alter_partition(
                self.node_id, p.topic, p.partition, p.leader_epoch, p.partition_epoch, new_isr)
            if code == 0:
                self._isr_changed(p, before, new_isr)
        except Exception:  # noqa: BLE001 — the next check retries
            log.exception("broker %d: AlterPartition %s-%d failed", self.node_id, p.topic,
                          p.partition)
        finally:
            p.isr_change_in_flight = False
            if p.pending_isr:
                # The high watermark waited for the replicas it would add (maximal ISR): without
                # them it may move now, and a follower's idle fetch no longer recomputes it.
                p.pending_isr = ()
                p.maybe_increment_high_watermark()

    def _isr_changed(self, p: Partition, before: tuple, after: tuple) -> None:
        """Kafka's IsrShrinksPerSec / IsrExpandsPerSec and its INFO line for each change."""
        if tuple(after) == tuple(before):
            return
        if len(after) < len(before):
            self.stats.isr_shrinks += 1
            what = "Shrinking"
        else:
            self.stats.isr_expands += 1
            what = "Expanding"
        log.info("broker %d: [Partition %s-%d] %s ISR from %s to %s", self.node_id, p.topic,
                 p.partition, what, ",".join(map(str, before)), ",".join(map(str, after)))

    async def _isr_shrink_loop(self) -> None:
        lag_ms = self.config.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(lag_ms / 2000)
            now = self.clock.now_ms()
            for key in sorted(self.partitions):
                p = self.partitions[key]
                if p.is_leader and not p.isr_change_in_flight:
                    out = p.out_of_sync_replicas(now, lag_ms)
                    if out:
                        self.request_isr_change(p, tuple(r for r in p.isr if r not in out))

    async def _retention_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            self.apply_retention()

    async def _checkpoint_loop(self) -> None:
        interval = self.config.replica_high_watermark_checkpoint_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            self.log_manager.checkpoint()

    async def _cleaner_loop(self) -> None:
        interval = max(self.config.log_cleaner_backoff_ms, 1) / 1000
        while True:
            await asyncio.sleep(interval)
            self.clean_logs()

    def clean_logs(self) -> int:
        """Compact every hosted compacted log that needs it (log/cleaner.py), leader or follower,
        below its high watermark. Returns how many were cleaned."""
        now = self.clock.now_ms()
        cleaned = 0
        for key in sorted(self.partitions):
            p = self.partitions[key]
            if p.log.config.compacts and cleaner.needs_cleaning(p.log, now, p.high_watermark):
                try:
                    result = cleaner.clean(p.log, now, p.high_watermark)
                except Exception:  # noqa: BLE001 — one bad log must not stop the others
                    log.exception("broker %d: cleaning %s-%d failed", self.node_id, *key)
                    continue
                cleaned += 1
                log.debug("broker %d: cleaned %s-%d: %s", self.node_id, key[0], key[1], result)
        return cleaned

    def apply_retention(self) -> None:
        now = self.clock.now_ms()
        for key in sorted(self.partitions):
            p = self.partitions[key]
            if p.is_leader and p.log.apply_retention(now, p.high_watermark):
                p.notify_data()
