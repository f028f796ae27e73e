"""read_committed through the ReplicaManager: Fetch stops at the last stable offset and returns the
aborted transactions of what it read; ListOffsets LATEST is the LSO; read_uncommitted sees all."""
from __future__ import annotations

from minibroker.broker.partition_reads import LATEST
from minibroker.log.batch import build_batch, build_control_batch
from minibroker.protocol.fast import ProducePartition, ProduceTopic
from tests.broker.test_replica_manager import T, _fetch_part, _leader_of_t, _rm
from tests.cluster_helpers import records_of


def _txn_batch(pid: int, seq: int, *values: bytes) -> bytes:
    return bytes(build_batch([(None, v, []) for v in values], timestamp=1000, producer_id=pid,
                             producer_epoch=0, base_sequence=seq, transactional=True))


def _produce(rm, raw: bytes) -> int:
    results, _ = rm.append_records([ProduceTopic(T, [ProducePartition(0, memoryview(raw))], -1)], 1)
    assert results[T][0].error_code == 0, results
    return results[T][0].base_offset


async def _fetch(rm, offset: int, isolation_level: int):
    got = await rm.fetch_records([(T, _fetch_part(offset), -1)], replica_id=-1, max_wait_ms=0,
                                 min_bytes=1, max_bytes=1 << 20, isolation_level=isolation_level)
    return got[T][0]


def _values(part) -> list[bytes]:
    return [v for rec in part.records for _, v in records_of(bytes(rec))]


async def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions():
    rm = _rm()
    _leader_of_t(rm)
    _produce(rm, _txn_batch(7, 0, b"a1", b"a2"))                        # 0-1, will abort
    _produce(rm, _txn_batch(8, 0, b"c1"))                               # 2, will commit
    assert rm.list_offset(T, 0, -1, LATEST, 1, -1)[1] == 0              # LSO: 7's first offset
    assert rm.list_offset(T, 0, -1, LATEST, 0, -1)[1] == 3              # HW
    committed = await _fetch(rm, 0, 1)
    assert (committed.last_stable_offset, list(committed.records)) == (0, [])
    uncommitted = await _fetch(rm, 0, 0)
    assert _values(uncommitted) == [b"a1", b"a2", b"c1"] and uncommitted.aborted_transactions is None

    await rm.append_coordinator_batch(T, 0, 0, build_control_batch(False, 7, 0), 0)     # 3
    committed = await _fetch(rm, 0, 1)
    assert committed.last_stable_offset == 2                            # 8 is still open
    assert _values(committed) == [b"a1", b"a2"]     # the client drops them: aborted below
    assert committed.aborted_transactions == [(7, 0)]
    await rm.append_coordinator_batch(T, 0, 0, build_control_batch(True, 8, 0), 0)      # 4
    assert rm.list_offset(T, 0, -1, LATEST, 1, -1)[1] == 5
    committed = await _fetch(rm, 2, 1)
    assert (committed.last_stable_offset, committed.high_watermark) == (5, 5)
    assert _values(committed)[0] == b"c1" and committed.aborted_transactions == [(7, 0)]
    after = await _fetch(rm, 4, 1)
    assert after.aborted_transactions == []         # nothing aborted in what this one read
