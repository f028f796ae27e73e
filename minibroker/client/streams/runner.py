"""KafkaStreams: runs a Topology with one task per partition, on the reference client.

Each instance has one group Consumer (group = application.id) subscribed to every source topic
(user topics and repartition topics), one Producer, one Admin, and a restore Consumer:
- tasks: (sub-topology id, partition), created on assignment; a task with a store restores it
  from its changelog partition before it processes anything (stores are dropped on revocation:
  the eager protocol revokes everything each rebalance, so they are always rebuilt);
- processing (under the instance's lock): poll -> run each record through its sub-topology ->
  sends (sink topics through the static partitioner; changelogs to the task's partition) ->
  flush -> commit. Revocation and KIP-253's on_partition_key_maybe_revoked wait for the lock, so
  what a member gives away was processed, written and committed (at-least-once, no duplicates
  without crashes);
- the group leader runs the Autoscaler before it assigns; every instance checks its assignment
  (INCOMPLETE_SOURCE_TOPIC_METADATA when internal topics fall behind and autoscaling is off).
Metrics (Metrics registry, `app.metrics`): current-subtopology-parallelism and
expected-subtopology-parallelism per sub-topology, num-autoscaling-failures per client.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

import kafka.errors as Errors

from minibroker.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from minibroker.client.kip253 import kip253_counts
from minibroker.client.metadata import TopicMetadata
from minibroker.client.streams.autoscaler import Autoscaler, Check, check
from minibroker.client.streams.errors import MissingSourceTopicError, StreamsError
from minibroker.client.streams.metrics import Metrics
from minibroker.client.streams.partitioner import LinearHashingPartitioner
from minibroker.client.streams.topology import StreamsBuilder, Topology

log = logging.getLogger("minibroker.client.streams")

DEFAULTS: dict[str, Any] = {
    "partition.autoscaling.enabled": False,
    "partition.autoscaling.timeout.ms": 15 * 60 * 1000,
    "minibroker.partition.autoscaling.followup.ms": 10_000,   # the seed's 10 s, ours to change
    "probing.rebalance.interval.ms": 600_000,
    "retry.backoff.ms": 100,
    "metadata.max.age.ms": 300_000,
    "session.timeout.ms": 45_000,
    "heartbeat.interval.ms": 3_000,
    "max.poll.records": 500,
    "poll.ms": 100,
    "replication.factor": 1,
    "request.timeout.ms": 30_000,
}
SUBTOPOLOGY_GROUP = "stream-subtopology-metrics"
CLIENT_GROUP = "stream-client-metrics"
_instances = itertools.count(1)


class _GroupConsumer(Consumer):
    """The group consumer, with the leader's step before assigning and enforce_rebalance."""

    def __init__(self, *args, before_assign=None, **kw) -> None:
        super().__init__(*args, **kw)
        self._before_assign = before_assign

    async def _assign(self, protocol, members):
        if self._before_assign is not None:
            await self._before_assign()
        return await super()._assign(protocol, members)

    def enforce_rebalance(self) -> None:
        self._rejoin = True
        self._kick()


class Task:
    __slots__ = ("subtopology", "partition", "store", "restored")

    def __init__(self, subtopology, partition: int) -> None:
        self.subtopology = subtopology
        self.partition = partition
        self.store: dict[bytes, bytes] | None = {} if subtopology.store else None
        self.restored = subtopology.store is None

    @property
    def id(self) -> str:
        return f"{self.subtopology.id}_{self.partition}"


class KafkaStreams:
    def __init__(self, topology: Topology | StreamsBuilder, bootstrap_servers: str,
                 config: dict[str, Any], partitioner: Any = None,
                 metrics: Metrics | None = None) -> None:
        unknown = sorted(set(config) - set(DEFAULTS) - {"application.id", "client.id"})
        if unknown:
            raise ValueError(f"unknown streams configs {unknown}")
        self.config = {**DEFAULTS, **config}
        self.application_id = self.config["application.id"]
        self.client_id = self.config.get("client.id") or \
            f"{self.application_id}-{next(_instances)}"
        self.topology = topology.build(self.application_id) \
            if isinstance(topology, StreamsBuilder) else topology
        self.bootstrap = bootstrap_servers
        self.partitioner = partitioner or LinearHashingPartitioner()
        if isinstance(self.partitioner, LinearHashingPartitioner) and \
                self.partitioner.initial_count_of is None:
            self.partitioner.initial_count_of = self._initial_count
        self.metrics = metrics or Metrics()
        self.failures_metric = Metrics.name("num-autoscaling-failures", CLIENT_GROUP,
                                            client_id=self.client_id)
        self.state = "CREATED"
        self.error: BaseException | None = None
        self.tasks: dict[tuple[int, int], Task] = {}
        self.processed = 0
        self.autoscaler = Autoscaler(self)
        self._lock = asyncio.Lock()
        self._run_task: asyncio.Task | None = None
        self._followup: asyncio.TimerHandle | None = None
        self._followup_at = 0.0
        self.followups_asked: list[float] = []       # delays (s) of follow-up rebalances asked for
        self.consumer: _GroupConsumer | None = None
        self.producer: Producer | None = None
        self.admin: Admin | None = None
        self._restorer: Consumer | None = None

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        c = self.config
        self.admin = Admin(self.bootstrap, client_id=f"{self.client_id}-admin",
                           request_timeout_ms=c["request.timeout.ms"])
        self.producer = Producer(self.bootstrap, client_id=f"{self.client_id}-producer",
                                 linger_ms=1, partitioner=self._partition,
                                 retry_backoff_ms=c["retry.backoff.ms"],
                                 request_timeout_ms=c["request.timeout.ms"],
                                 metadata_timeout_ms=c["request.timeout.ms"])
        await self.producer.start()
        if self.autoscaler.enabled:
            self.metrics.set(self.failures_metric, 0)
        # The leader also creates missing ones; doing it first keeps the group consumer from
        # subscribing to repartition topics that do not exist yet.
        counts = await self.autoscaler.counts(self.topology.external_sources
                                              + self.topology.internal_topics)
        first = check(self.topology, counts)
        if first is None:
            raise StreamsError(f"source topics missing: {self.topology.external_sources}")
        if first.missing:
            await self.create_internal_topics({t: first.intended[t] for t in first.missing})
        self.consumer = _GroupConsumer(
            self.bootstrap, group_id=self.application_id, client_id=self.client_id,
            auto_offset_reset="earliest", enable_auto_commit=False,
            allow_auto_create_topics=False, metadata_max_age_ms=c["metadata.max.age.ms"],
            session_timeout_ms=c["session.timeout.ms"],
            heartbeat_interval_ms=c["heartbeat.interval.ms"],
            max_poll_records=c["max.poll.records"], retry_backoff_ms=c["retry.backoff.ms"],
            request_timeout_ms=c["request.timeout.ms"], fetch_max_wait_ms=100,
            before_assign=self.autoscaler.on_leader)
        self.consumer.subscribe(self.topology.source_topics, listener=self,
                                partition_key_listener=self)
        self.state = "RUNNING"
        self._run_task = asyncio.get_running_loop().create_task(self._run(),
                                                                name=f"{self.client_id}-run")

    async def close(self) -> None:
        if self.state == "NOT_RUNNING":
            return
        if self.state != "ERROR":
            self.state = "PENDING_SHUTDOWN"
        if self._followup is not None:
            self._followup.cancel()
        if self._run_task is not None:
            await asyncio.gather(self._run_task, return_exceptions=True)
        await self._close_clients()
        if self.state != "ERROR":
            self.state = "NOT_RUNNING"

    async def _close_clients(self) -> None:
        for closer in (self.consumer and self.consumer.close, self._restorer and
                       self._restorer.close, self.producer and self.producer.stop,
                       self.admin and self.admin.close):
            if closer is not None:
                try:
                    await closer()
                except Exception as e:  # noqa: BLE001 — closing: log and go on
                    log.debug("%s: close: %r", self.client_id, e)
        self.consumer = self._restorer = None

    def fail(self, error: BaseException) -> None:
        """Stop processing (the uncaught exception handler's SHUTDOWN_CLIENT): state ERROR."""
        if self.error is None:
            log.error("%s: %s", self.client_id, error)
            self.error = error
        self.state = "ERROR"

    # ------------------------------------------------------------------ partitioning
    def _initial_count(self, topic: str) -> int | None:
        md = self.producer.metadata.topic(topic) if self.producer is not None else None
        return md.initial_partition_count if md is not None and \
            md.initial_partition_count > 0 else None

    def _partition(self, topic: str, key: bytes | None, md: TopicMetadata) -> int:
        counts = kip253_counts(md)
        n = counts[1] if counts else md.producer_partition_count
        if key is None:
            return self.processed % n
        return self.partitioner.static_partition(topic, key, n)

    # ------------------------------------------------------------------ topics, rebalances
    async def create_internal_topics(self, counts: dict[str, int]) -> None:
        rf = self.config["replication.factor"]
        errors = await self.admin.create_topics([NewTopic(t, n, rf) for t, n in
                                                 sorted(counts.items())], raise_on_error=False)
        for t, e in sorted(errors.items()):
            if e is not None and not isinstance(e, Errors.TopicAlreadyExistsError):
                log.warning("%s: creating internal topic %s: %r", self.client_id, t, e)

    def schedule_rebalance(self, delay: float) -> None:
        """A follow-up rebalance `delay` s from now (the earliest asked for wins)."""
        loop = asyncio.get_running_loop()
        at = loop.time() + delay
        self.followups_asked.append(delay)
        if self._followup is not None and not self._followup.cancelled() and \
                self._followup_at <= at and self._followup_at > loop.time():
            return
        if self._followup is not None:
            self._followup.cancel()
        self._followup_at = at
        self._followup = loop.call_at(at, self._enforce_rebalance)

    def _enforce_rebalance(self) -> None:
        self._followup = None
        if self.consumer is not None and self.state == "RUNNING":
            self.consumer.enforce_rebalance()

    def update_parallelism_metrics(self, c: Check) -> None:
        for st in self.topology.subtopologies:
            current = max((c.counts.get(s, 0) for s in st.sources), default=0)
            self.metrics.set(Metrics.name("current-subtopology-parallelism", SUBTOPOLOGY_GROUP,
                                          subtopology_id=st.id, client_id=self.client_id),
                             current)
            if self.autoscaler.enabled:
                self.metrics.set(Metrics.name("expected-subtopology-parallelism",
                                              SUBTOPOLOGY_GROUP, subtopology_id=st.id,
                                              client_id=self.client_id),
                                 c.parallelism[st.id])

    def metric(self, name: str, **tags) -> float | None:
        return self.metrics.value(name, **tags)

    # ------------------------------------------------------------------ rebalance listener
    async def on_partitions_revoked(self, tps) -> None:
        async with self._lock:
            for tp in tps:
                st = self.topology.subtopology_of(tp.topic)
                self.tasks.pop((st.id, tp.partition), None)

    async def on_partitions_assigned(self, tps) -> None:
        async with self._lock:
            for tp in sorted(tps):
                st = self.topology.subtopology_of(tp.topic)
                if (st.id, tp.partition) not in self.tasks:
                    self.tasks[(st.id, tp.partition)] = Task(st, tp.partition)
            md = self.consumer.metadata if self.consumer is not None else None
            if md is None:
                return
            counts = {t: (m.producer_partition_count if m is not None and m.partitions
                          else None) for t in self.topology.source_topics
                      for m in [md.topic(t)]}
            c = check(self.topology, counts)
            if c is None:
                return
            self.update_parallelism_metrics(c)
            behind = {t: hw for t, hw in c.under.items() if t in counts}
            if behind and not self.autoscaler.enabled:
                self.fail(MissingSourceTopicError(
                    f"INCOMPLETE_SOURCE_TOPIC_METADATA: internal topics {sorted(behind)} are "
                    "narrower than their sources and partition.autoscaling.enabled is false"))

    async def on_partition_key_maybe_revoked(self, tps) -> None:
        async with self._lock:      # the batch under way is written and committed
            pass

    async def on_partition_key_assigned(self, tps) -> None:
        return None

    # ------------------------------------------------------------------ processing
    async def _run(self) -> None:
        poll_s = self.config["poll.ms"] / 1000
        try:
            while self.state == "RUNNING":
                async with self._lock:
                    if self.state != "RUNNING":
                        break
                    await self._restore()
                    records = await self.consumer.poll(poll_s)
                    if records:
                        await self._process(records)
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 — the app's uncaught exception handler
            self.fail(e)
        if self.state == "ERROR" and self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.close()        # leave the group so the others take over

    async def _process(self, records) -> None:
        futs = []
        send = self.producer.send
        for r in records:
            task = self.tasks.get((self.topology.subtopology_of(r.topic).id, r.partition))
            if task is None:
                continue                      # revoked meanwhile: its new owner has it
            st = task.subtopology
            k, v = r.key, r.value
            dropped = False
            for step in st.steps:
                if step[0] == "map":
                    out = step[1](k, v)
                    if out is None:
                        dropped = True
                        break
                    k, v = out
                else:
                    _, _, init, agg = step
                    v = agg(k, v, task.store.get(k) if k in task.store else init())
                    task.store[k] = v
                    futs.append(send(st.changelog, v, key=k, partition=task.partition))
            if not dropped and st.sink is not None:
                futs.append(send(st.sink, v, key=k))
            self.processed += 1
        if futs:
            await self.producer.flush()
            for f in futs:
                if f.exception() is not None:
                    raise f.exception()
        try:
            await self.consumer.commit()
        except Errors.KafkaError as e:
            log.info("%s: commit failed (the records will come again): %r", self.client_id, e)

    async def _restore(self) -> None:
        todo = [t for t in self.tasks.values() if not t.restored]
        if not todo:
            return
        tps = {TopicPartition(t.subtopology.changelog, t.partition): t for t in todo}
        ends = await self.admin.list_offsets({tp: "latest" for tp in tps})
        for t in todo:
            t.store.clear()
        want = {tp: ends[tp][0] for tp in tps if ends[tp][0] > 0}
        if want:
            if self._restorer is None:
                self._restorer = Consumer(self.bootstrap, client_id=f"{self.client_id}-restore",
                                          auto_offset_reset="earliest", ordering_barrier=False,
                                          allow_auto_create_topics=False, fetch_max_wait_ms=50)
            rc = self._restorer
            rc.assign(list(want))
            for tp in want:
                rc.seek(tp, 0)
            loop = asyncio.get_running_loop()
            end = loop.time() + self.config["request.timeout.ms"] / 1000
            left = dict(want)
            while left:
                if loop.time() > end:
                    raise StreamsError(f"restoring {sorted(left)} timed out")
                for r in await rc.poll(0.1):
                    tp = TopicPartition(r.topic, r.partition)
                    task = tps[tp]
                    task.store[r.key] = r.value
                    if tp in left and r.offset + 1 >= left[tp]:
                        del left[tp]
            rc.assign([])               # idle until the next restore: no fetching meanwhile
        for t in todo:
            t.restored = True
