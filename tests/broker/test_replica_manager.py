"""The ReplicaManager alone, built from the few things it uses (no Broker, no socket): the leader
append path Produce uses and the reads of Fetch, ListOffsets and OffsetForLeaderEpoch."""
from __future__ import annotations

import asyncio
import uuid

from kafka.errors import (NotLeaderForPartitionError, OffsetOutOfRangeError,
                          UnknownTopicOrPartitionError)
from kafka.protocol.consumer import FetchRequest

from minibroker.metadata.cache import MetadataCache
from minibroker.broker.partition_reads import EARLIEST, LATEST
from minibroker.broker.replica_manager import ReplicaManager
from minibroker.clock import Clock
from minibroker.config import ClusterConfig
from minibroker.log.config import broker_defaults
from minibroker.protocol.fast import ProducePartition, ProduceTopic
from tests.cluster_helpers import batch, records_of

T = "t"
_FPart = FetchRequest.FetchTopic.FetchPartition


def _leader_of_t(rm: ReplicaManager, leader_epoch: int = 0) -> None:
    assert rm.apply_partition_state(T, uuid.UUID(int=1), 0, leader=1, leader_epoch=leader_epoch,
                                    partition_epoch=leader_epoch, isr=[1], replicas=[1],
                                    undeleted_partition_count=1, configs={}) == 0


def _produce(rm: ReplicaManager, *values: bytes, acks: int = 1):
    topics = [ProduceTopic(T, [ProducePartition(0, memoryview(batch(list(values), 1000)))], -1)]
    return rm.append_records(topics, acks)


def _fetch_part(offset: int, last_fetched_epoch: int = -1) -> _FPart:
    return _FPart(partition=0, current_leader_epoch=-1, fetch_offset=offset,
                  last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
                  partition_max_bytes=1 << 20)


def _rm() -> ReplicaManager:
    config = ClusterConfig()
    return ReplicaManager(1, config, Clock(wall_base_ms=0), MetadataCache(), controller=None,
                          log_defaults=broker_defaults(config.describe()))


async def test_append_as_leader_then_fetch_list_offsets_and_epochs():
    rm = _rm()
    _leader_of_t(rm)
    results, waits = _produce(rm, b"a", b"b")
    [part] = results[T]
    assert (part.error_code, part.base_offset, part.log_start_offset, waits) == (0, 0, 0, [])
    _leader_of_t(rm, leader_epoch=1)            # a new term: the next batch is epoch 1
    results, waits = _produce(rm, b"c", acks=-1)
    assert (results[T][0].base_offset, waits) == (2, [])     # RF 1: the HW covers it at once

    got = await rm.fetch_records([(T, _fetch_part(1), -1)], replica_id=-1, max_wait_ms=0,
                                 min_bytes=1, max_bytes=1 << 20, isolation_level=0)
    [p] = got[T]
    assert (p.error_code, p.high_watermark, p.log_start_offset) == (0, 3, 0)
    assert [v for rec in p.records for _, v in records_of(bytes(rec))] == [b"a", b"b", b"c"]
    out = await rm.fetch_records([(T, _fetch_part(9), -1)], -1, 0, 1, 1 << 20, 0)
    assert out[T][0].error_code == OffsetOutOfRangeError.errno

    assert rm.list_offset(T, 0, -1, EARLIEST, 0, -1)[:2] == (0, 0)
    assert rm.list_offset(T, 0, -1, LATEST, 0, -1) == (0, 3, -1, 1)
    assert rm.end_offset_for_epoch(T, 0, -1, 0, any_replica=False) == (0, 0, 2)
    assert rm.end_offset_for_epoch(T, 0, -1, 1, any_replica=False) == (0, 1, 3)


def test_not_a_replica_here():
    rm = _rm()
    results, _ = _produce(rm, b"a")
    assert results[T][0].error_code == UnknownTopicOrPartitionError.errno
    assert rm.list_offset(T, 0, -1, LATEST, 0, -1)[0] == UnknownTopicOrPartitionError.errno
    assert rm.apply_partition_state(T, uuid.UUID(int=1), 0, leader=2, leader_epoch=0,
                                    partition_epoch=0, isr=[2], replicas=[2],
                                    undeleted_partition_count=1, configs={}) == 0
    results, _ = _produce(rm, b"a")
    assert results[T][0].error_code == NotLeaderForPartitionError.errno


class _RefusingController:
    """An AlterPartition that fails (as when the controller is unreachable)."""
    async def alter_partition(self, *args):
        raise ConnectionError("controller unreachable")


async def test_a_failed_isr_expansion_lets_the_high_watermark_move_without_a_follower_fetch():
    """While an ISR expansion is in flight the HW waits for the replica it adds (Kafka's maximal
    ISR). A follower's fetch that moves nothing no longer recomputes the HW, so when the
    expansion fails, dropping the pending ISR must recompute it there."""
    config = ClusterConfig()
    rm = ReplicaManager(1, config, Clock(wall_base_ms=0), MetadataCache(),
                        controller=_RefusingController(),
                        log_defaults=broker_defaults(config.describe()))
    rm.running = True
    assert rm.apply_partition_state(T, uuid.UUID(int=1), 0, leader=1, leader_epoch=0,
                                    partition_epoch=0, isr=[1, 2], replicas=[1, 2, 3],
                                    undeleted_partition_count=1, configs={}) == 0
    p = rm.get(T, 0)
    _produce(rm, b"a", b"b", acks=-1)
    p.update_follower_fetch(2, 2, 0)             # replica 2 has both records
    assert p.high_watermark == 2
    p.update_follower_fetch(3, 2, 0)             # 3 caught up: its expansion goes out
    assert p.pending_isr == (1, 2, 3) and p.isr_change_in_flight
    _produce(rm, b"c", acks=-1)
    p.update_follower_fetch(2, 3, 0)
    assert p.high_watermark == 2                 # waits for 3, which may already count
    p.update_follower_fetch(2, 3, 0)             # an idle fetch: nothing moved, nothing recomputed
    assert p.high_watermark == 2
    for _ in range(3):
        await asyncio.sleep(0)                   # the AlterPartition fails: pending ISR dropped
    assert (p.pending_isr, p.isr_change_in_flight, p.high_watermark) == ((), False, 3)
