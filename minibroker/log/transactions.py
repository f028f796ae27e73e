"""Transactions in one partition's log (KIP-98): markers, the last stable offset, aborted txns.

A transactional producer's batches (attribute bit 0x10) open a transaction at the offset of its
first batch; a control batch (bit 0x20) from the coordinator, holding one COMMIT or ABORT marker,
ends it at the marker's offset. What this module keeps, as Kafka's ProducerStateManager and
transaction index do:
- `ongoing`: producer id -> first offset of its open transaction;
- `unreplicated`: completed transactions whose marker the high watermark has not yet passed
  (they still hold the last stable offset back, so a read_committed consumer never sees a
  transaction end the leader could still lose);
- `aborted`: the aborted-transaction index, (producer id, first offset, marker offset) in marker
  order, which read_committed fetches return for the range they read (clients drop those records).

The LSO is min(first offset of every ongoing or unreplicated transaction, high watermark). A log
with no transactional batch never touches any of this (the read_uncommitted path costs nothing).
"""
from __future__ import annotations

from bisect import bisect_left
from typing import NamedTuple

from minibroker.log.batch import HEADER_SIZE
from minibroker.protocol.varint import read_varint

ABORT, COMMIT = 0, 1            # ControlRecordType


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int            # the ABORT marker's offset


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    committed: bool


def control_type(batch: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """The marker type (ABORT 0 / COMMIT 1) of the control batch at `pos` of `batch`: the key of
    its first record is (version int16, type int16). Control batches are never compressed.
    Anything that does not decode reads as ABORT (the safe side for read_committed)."""
    try:
        p = pos + HEADER_SIZE
        _, p = read_varint(batch, p)        # record length
        p += 1                              # record attributes
        _, p = read_varint(batch, p)        # timestamp delta
        _, p = read_varint(batch, p)        # offset delta
        key_len, p = read_varint(batch, p)
        if key_len < 4:
            return ABORT
        return COMMIT if int.from_bytes(batch[p + 2:p + 4], "big", signed=True) == COMMIT else ABORT
    except (IndexError, ValueError):
        return ABORT


class TxnIndex:
    __slots__ = ("unreplicated", "aborted", "_aborted_last")

    def __init__(self) -> None:
        self.unreplicated: list[CompletedTxn] = []
        self.aborted: list[AbortedTxn] = []
        self._aborted_last: list[int] = []      # marker offsets of `aborted`, for bisect

    def completed(self, txn: CompletedTxn) -> None:
        self.unreplicated.append(txn)
        if not txn.committed:
            self.aborted.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset))
            self._aborted_last.append(txn.last_offset)

    def first_unstable_offset(self, ongoing: dict[int, int], high_watermark: int) -> int | None:
        """The first offset of a transaction not yet decided and replicated, or None."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]
        first = min(ongoing.values()) if ongoing else None
        for t in self.unreplicated:
            if first is None or t.first_offset < first:
                first = t.first_offset
        return first

    def aborted_in(self, start: int, upper: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions with records in [start, upper):
        marker at or after `start`, first offset before `upper` (Kafka's collectAbortedTxns)."""
        out = []
        aborted = self.aborted
        for i in range(bisect_left(self._aborted_last, start), len(aborted)):
            t = aborted[i]
            if t.first_offset < upper:
                out.append((t.producer_id, t.first_offset))
        return out

    def drop_before(self, log_start_offset: int) -> None:
        """Entries wholly below the log start offset concern no readable record."""
        i = bisect_left(self._aborted_last, log_start_offset)
        if i:
            del self.aborted[:i], self._aborted_last[:i]

    def truncate_from(self, offset: int) -> None:
        """The log lost every offset >= `offset`: markers there never happened."""
        i = bisect_left(self._aborted_last, offset)
        del self.aborted[i:], self._aborted_last[i:]
        self.unreplicated = [t for t in self.unreplicated if t.last_offset < offset]

    def clear(self) -> None:
        self.unreplicated.clear()
        self.aborted.clear()
        self._aborted_last.clear()
