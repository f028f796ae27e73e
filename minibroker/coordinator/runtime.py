"""The group coordinator runtime of one broker.

Groups and offsets live in __consumer_offsets; this broker coordinates the groups whose
__consumer_offsets partition it leads, loading them by replaying that partition when it becomes
leader and unloading them when it stops being leader.

One `Shard` per led partition holds that partition's groups. While a shard replays its log,
requests for its groups get COORDINATOR_LOAD_IN_PROGRESS; groups of partitions this broker does
not lead get NOT_COORDINATOR. Writes are record batches appended to the partition's log with the
leader epoch the shard was loaded under (origin "coordinator"); a write completes when the high
watermark passes it (acks=all), or with an error code (NOT_LEADER → the shard is gone, or
REQUEST_TIMED_OUT after offsets.commit.timeout.ms).

The classic protocol is minibroker.coordinator.group.classic_coordinator (`self.classic`),
committed offsets of every group minibroker.coordinator.offset_manager (`self.offsets`),
KIP-848 consumer groups minibroker.coordinator.group.consumer_coordinator (`self.consumer`),
kept in `Shard.consumer_groups` (minibroker.coordinator.shard). Every record of the partition,
both protocols, is applied by minibroker.coordinator.replay.replay: as it is written, and again
when a broker loads the partition.

The runtime gets what it uses, not the broker: config, clock, ids, the broker's MetadataCache
(read, and listened to), a PartitionWriter for the __consumer_offsets partitions, and a way to
ask the controller to create that topic.

Deleted partitions (Kafka's onPartitionsDeleted): the runtime listens to the broker's
MetadataCache; a partition the controller removed (a drained KIP-253 partition, or a deleted
topic's) gets its committed offsets tombstoned in every loaded shard, and in a loading shard once
loaded. Only a removal this broker's metadata shows counts: a partition re-created at the same
index (KIP-253 N -> 2N -> N -> 2N) then starts without the old offsets.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable

import kafka.errors as Errors
from kafka.record.default_records import DefaultRecordBatch

from minibroker.coordinator.group.classic_coordinator import ClassicGroupCoordinator
from minibroker.coordinator.group.consumer_coordinator import ConsumerGroupCoordinator
from minibroker.coordinator.offset_manager import OffsetMetadataManager
from minibroker.coordinator.offsets import OFFSETS_TOPIC
from minibroker.coordinator.partition_writer import PartitionWriter
from minibroker.coordinator.positions import ConsumerGroupPositions
from minibroker.coordinator.replay import replay
from minibroker.coordinator.shard import Shard
from minibroker.coordinator.shards import CreateTopics, ShardedCoordinator
from minibroker.coordinator.txn_offsets import complete_txn, replay_txn_records
from minibroker.log.batch import build_batch
from minibroker.log.config import VALIDATORS
from minibroker.log.transactions import COMMIT, control_type

if TYPE_CHECKING:
    from minibroker.metadata.cache import MetadataCache
    from minibroker.clock import Clock
    from minibroker.config import ClusterConfig
    from minibroker.ids import IdSource

log = logging.getLogger("minibroker.coordinator")

OFFSETS_COMMIT_TIMEOUT_MS = 5000            # offsets.commit.timeout.ms
# Kafka's settings for the topic; those our log does not know (compression.type) are left out.
OFFSETS_TOPIC_CONFIGS = {"cleanup.policy": "compact", "compression.type": "producer",
                         "segment.bytes": "104857600"}


class GroupCoordinatorRuntime(ShardedCoordinator[Shard]):
    topic = OFFSETS_TOPIC

    def __init__(self, node_id: int, config: "ClusterConfig", clock: "Clock", ids: "IdSource",
                 metadata: "MetadataCache", writer: PartitionWriter,
                 create_topics: CreateTopics) -> None:
        super().__init__(node_id, config, clock, metadata, writer, create_topics)
        self.ids = ids
        self.classic = ClassicGroupCoordinator(self)
        self.offsets = OffsetMetadataManager(self)
        self.consumer = ConsumerGroupCoordinator(self)
        self.positions = ConsumerGroupPositions(self)     # KIP-253 ConsumerGroupPosition
        metadata.topic_listeners.append(self._on_topic)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.running = True
        self._spawn(self._expiration_loop())

    # ------------------------------------------------------------------ deleted partitions
    def _on_topic(self, name: str, old, new) -> None:
        """MetadataCache listener: a partition the old TopicInfo had and the new one lacks
        (KIP-253 removal), or any partition of a deleted (or re-created) topic, is deleted."""
        if old is None:
            return
        if new is None or new.topic_id != old.topic_id:
            gone = set(old.partitions)
        else:
            gone = set(old.partitions) - set(new.partitions)
        if gone:
            self.on_partitions_deleted([(name, p) for p in sorted(gone)])

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        """Kafka's GroupCoordinator.onPartitionsDeleted: drop the groups' offsets (and KIP-253
        reported positions) of these partitions, so a partition re-created at the same index
        starts without them."""
        if not self.running:
            return
        self.positions.on_partitions_deleted(partitions)
        for shard in self.shards_in_order():
            if shard.loading:
                shard.deleted_while_loading.update(partitions)
                continue
            self._delete_offsets_of(shard, partitions)

    def _delete_offsets_of(self, shard: Shard, partitions: list[tuple[str, int]]) -> None:
        records = self.offsets.on_partitions_deleted(shard, partitions)
        if records:
            log.info("broker %d: %s-%d: offsets of deleted partitions %s dropped",
                     self.node_id, OFFSETS_TOPIC, shard.partition, partitions)
            self.append(shard, records, None)

    # ------------------------------------------------------------------ the internal topic
    def _default_partitions(self) -> int:
        return self.config.offsets_topic_num_partitions

    def _topic_spec(self, live_brokers: int) -> tuple[int, dict[str, str]]:
        return (min(self.config.offsets_topic_replication_factor, live_brokers),
                {k: v for k, v in OFFSETS_TOPIC_CONFIGS.items() if k in VALIDATORS})

    def shards_in_order(self) -> list[Shard]:
        return [self.shards[pid] for pid in sorted(self.shards)]

    @property
    def max_record_bytes(self) -> int:
        """What one coordinator record batch may take (max.message.bytes of the topic)."""
        t = self.metadata.topics.get(OFFSETS_TOPIC)
        if t is not None and t.configs and "max.message.bytes" in t.configs:
            return int(t.configs["max.message.bytes"])
        return self.config.message_max_bytes

    # ------------------------------------------------------------------ timers
    def call_later(self, delay_ms: int, fn: Callable, *args) -> asyncio.TimerHandle:
        """A timer on the event loop's clock (virtual in tests), as Kafka's purgatories."""
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fn, *args)

    # ------------------------------------------------------------------ writes
    def append(self, shard: Shard, records: list[tuple[bytes, bytes | None]],
               on_commit: Callable[[int], None] | None, *, producer_id: int = -1,
               producer_epoch: int = -1) -> asyncio.Future:
        """Append `records` as one batch now; the future resolves to 0 once the high watermark
        passed them, else to an error code. `on_commit(code)` runs first, in the same callback.
        A producer id makes it a transactional batch (TxnOffsetCommit, coordinator/txn_offsets)."""
        loop = asyncio.get_running_loop()
        result = loop.create_future()
        timer: list[asyncio.TimerHandle] = []

        def finish(code: int) -> None:
            if result.done():
                return
            for t in timer:
                t.cancel()
            if on_commit is not None:
                try:
                    on_commit(code)
                except Exception:  # noqa: BLE001 — a bug here must not hang the waiters
                    log.exception("coordinator write callback failed")
            result.set_result(code)

        if (self.writer.leader_epoch(shard.partition) != shard.leader_epoch
                or self.shards.get(shard.partition) is not shard):
            loop.call_soon(finish, Errors.NotLeaderForPartitionError.errno)
            return result
        now = self.clock.now_ms()
        batch = build_batch([(k, v, []) for k, v in records], timestamp=now,
                            producer_id=producer_id, producer_epoch=producer_epoch,
                            transactional=producer_id >= 0)
        try:
            hw = self.writer.append(shard.partition, shard.leader_epoch, batch, now)
        except Errors.KafkaError as e:
            loop.call_soon(finish, e.errno)
            return result
        timer.append(loop.call_later(OFFSETS_COMMIT_TIMEOUT_MS / 1000, finish,
                                     Errors.RequestTimedOutError.errno))
        hw.add_done_callback(lambda f: finish(f.result() if not f.cancelled()
                                              else Errors.NotLeaderForPartitionError.errno))
        return result

    # ------------------------------------------------------------------ load / unload
    def _new_shard(self, partition: int, leader_epoch: int) -> Shard:
        return Shard(partition, leader_epoch)

    def _on_loaded(self, shard: Shard) -> None:
        for producer_id, commit in shard.markers_while_loading:
            complete_txn(shard, producer_id, commit)
        shard.markers_while_loading.clear()
        if shard.deleted_while_loading:
            self._delete_offsets_of(shard, sorted(shard.deleted_while_loading))
            shard.deleted_while_loading.clear()
        self.classic.on_loaded(shard)
        self.consumer.on_loaded(shard)
        # INFO only when there was something to load: a new cluster has 50 empty partitions.
        log.log(logging.INFO if shard.groups else logging.DEBUG, "broker %d: loaded %s-%d "
                "(%d groups)", self.node_id, OFFSETS_TOPIC, shard.partition, len(shard.groups))

    def _replay_batch(self, shard: Shard, data: bytes) -> None:
        batch = DefaultRecordBatch(data)
        if batch.is_control_batch:      # a transaction marker: TxnOffsetCommit offsets decided
            complete_txn(shard, batch.producer_id, control_type(data) == COMMIT)
            return
        if batch.is_transactional:
            replay_txn_records(shard, batch.producer_id,
                               [(r.key, r.value) for r in batch if r.key is not None])
            return
        for record in batch:
            if record.key is None:
                continue
            try:
                replay(shard, record.key, record.value)
            except ValueError:
                log.warning("%s-%d offset %d: undecodable coordinator record", OFFSETS_TOPIC,
                            shard.partition, record.offset)

    def _on_unloaded(self, shard: Shard) -> None:
        self.classic.on_unloaded(shard)
        self.consumer.on_unloaded(shard)

    # ------------------------------------------------------------------ transactions
    def on_txn_marker(self, topic: str, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was appended to a __consumer_offsets partition we lead
        (WriteTxnMarkers): the producer's pending transactional offsets are decided."""
        if topic != OFFSETS_TOPIC:
            return
        shard = self.shards.get(partition)
        if shard is None:
            return
        if shard.loading:
            shard.markers_while_loading.append((producer_id, commit))
        else:
            complete_txn(shard, producer_id, commit)

    # ------------------------------------------------------------------ retention
    async def _expiration_loop(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self.offsets.expire_offsets()
            except Exception:  # noqa: BLE001
                log.exception("offset expiration failed")
