"""A transaction coordinator's in-memory state: one TxnShard per led __transaction_state partition,
its transactional ids' TxnMetadata, rebuilt by `replay` from the partition's records — the same
function applies a record when its write completes and when a broker loads the partition."""
from __future__ import annotations

import asyncio

from minibroker.coordinator.txn.records import (
    COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_ABORT, PREPARE_COMMIT, STATE_NAMES,
    TxnRecord, decode_key, decode_value,
)


class TxnMetadata:
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "last_producer_id",
                 "last_producer_epoch", "timeout_ms", "state", "partitions", "start_ms",
                 "last_update_ms", "pending")

    def __init__(self, transactional_id: str, r: TxnRecord) -> None:
        self.transactional_id = transactional_id
        self.last_producer_id = -1
        self.last_producer_epoch = -1
        self.pending = False            # a write of this id is in flight: others wait (CONCURRENT_TRANSACTIONS)
        self.apply(r)

    def apply(self, r: TxnRecord) -> None:
        if getattr(self, "producer_id", None) is not None and \
                (r.producer_id, r.producer_epoch) != (self.producer_id, self.producer_epoch):
            self.last_producer_id, self.last_producer_epoch = self.producer_id, self.producer_epoch
        self.producer_id = r.producer_id
        self.producer_epoch = r.producer_epoch
        self.timeout_ms = r.timeout_ms
        self.state = r.state
        self.partitions = set(r.partitions)
        self.last_update_ms = r.last_update_ms
        self.start_ms = r.start_ms

    def record(self, **changes) -> TxnRecord:
        r = TxnRecord(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                      tuple(sorted(self.partitions)), self.last_update_ms, self.start_ms)
        return r._replace(**changes)

    @property
    def state_name(self) -> str:
        return STATE_NAMES[self.state]

    @property
    def preparing(self) -> bool:
        return self.state in (PREPARE_COMMIT, PREPARE_ABORT)

    @property
    def completed(self) -> bool:
        return self.state in (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)

    @property
    def ongoing(self) -> bool:
        return self.state == ONGOING

    def __repr__(self) -> str:
        return (f"TxnMetadata({self.transactional_id!r}, pid={self.producer_id}, "
                f"epoch={self.producer_epoch}, {self.state_name}, {sorted(self.partitions)})")


class TxnShard:
    __slots__ = ("partition", "leader_epoch", "loading", "txns", "load_task")

    def __init__(self, partition: int, leader_epoch: int) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch        # also the coordinator epoch markers carry
        self.loading = True
        self.txns: dict[str, TxnMetadata] = {}
        self.load_task: asyncio.Task | None = None


def replay(shard: TxnShard, key: bytes, value: bytes | None) -> None:
    """Apply one __transaction_state record (a None value: the id expired)."""
    tid = decode_key(key)
    if value is None:
        shard.txns.pop(tid, None)
        return
    r = decode_value(value)
    txn = shard.txns.get(tid)
    if txn is None:
        shard.txns[tid] = TxnMetadata(tid, r)
    else:
        txn.apply(r)
