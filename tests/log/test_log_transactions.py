"""Transactions in the log: open transactions per producer, the last stable offset's input (first
unstable offset), the aborted-transaction index, followers building the same from replicated
batches, and truncation rebuilding it."""
from __future__ import annotations

import pytest
from kafka.errors import InvalidProducerEpochError, InvalidTxnStateError
from log_helpers import client_batch, new_log

from minibroker.log.batch import build_control_batch
from minibroker.log.transactions import ABORT, COMMIT, control_type


def txn(log, pid, seq, *values, epoch=0):
    return log.append_as_leader(client_batch(list(values), producer_id=pid, producer_epoch=epoch,
                                             base_sequence=seq, transactional=True), 0)


def marker(log, pid, commit, epoch=0):
    return log.append_as_leader(build_control_batch(commit, pid, epoch), 0, origin="coordinator")


def test_control_type_reads_the_marker_key():
    assert control_type(build_control_batch(True, 1, 0)) == COMMIT
    assert control_type(build_control_batch(False, 1, 0)) == ABORT
    assert control_type(b"\x00" * 70) == ABORT          # undecodable: the safe side


def test_open_transactions_hold_the_first_unstable_offset_until_decided_and_replicated():
    log = new_log()
    hw = [0]
    log.high_watermark_of = lambda: hw[0]       # as a Partition's: replication lags the appends
    log.append_as_leader(client_batch([b"plain"]), 0)                  # 0
    assert log.first_unstable_offset(1) is None
    txn(log, 7, 0, b"a", b"b")                                          # 1-2
    txn(log, 8, 0, b"x")                                                # 3
    txn(log, 7, 2, b"c")                                                # 4
    assert log.producers.ongoing == {7: 1, 8: 3}
    assert log.first_unstable_offset(5) == 1
    assert marker(log, 7, commit=False).base_offset == 5                # abort 7 at offset 5
    assert log.producers.ongoing == {8: 3}
    assert log.first_unstable_offset(5) == 1        # the marker is not below the HW yet
    assert log.first_unstable_offset(6) == 3        # now it is: only 8's transaction is left
    hw[0] = 6
    marker(log, 8, commit=True)                                         # 6
    assert log.first_unstable_offset(6) == 3        # its marker is not replicated yet
    assert log.first_unstable_offset(7) is None
    assert log.txn_index.unreplicated == []         # forgotten once the HW passed the markers
    # Only the aborted one is indexed; it concerns fetches that read any of offsets 1..5.
    assert log.aborted_transactions(0, 7) == [(7, 1)]
    assert log.aborted_transactions(0, 1) == []        # read ended before it started
    assert log.aborted_transactions(6, 7) == []        # read started after its marker
    assert log.aborted_transactions(5, 6) == [(7, 1)]


def test_a_plain_batch_inside_an_open_transaction_is_refused_and_old_epochs_are_fenced():
    log = new_log()
    txn(log, 7, 0, b"a", epoch=2)
    with pytest.raises(InvalidTxnStateError):
        log.append_as_leader(client_batch([b"b"], producer_id=7, producer_epoch=2, base_sequence=1), 0)
    with pytest.raises(InvalidProducerEpochError):
        marker(log, 7, commit=True, epoch=1)
    marker(log, 7, commit=False, epoch=3)           # the coordinator's bumped epoch aborts it
    assert log.producers.ongoing == {} and log.aborted_transactions(0, 9) == [(7, 0)]
    with pytest.raises(InvalidProducerEpochError):  # the zombie at epoch 2 is fenced now
        txn(log, 7, 1, b"late", epoch=2)


def test_a_follower_builds_the_same_state_and_truncation_rebuilds_it():
    leader, follower = new_log(), new_log()
    txn(leader, 7, 0, b"a")                                             # 0
    marker(leader, 7, commit=False)                                     # 1
    txn(leader, 7, 1, b"b", epoch=0)                                    # 2 (a new transaction)
    follower.append_as_follower(b"".join(bytes(v) for v in leader.read(0, 1 << 20).records))
    assert follower.producers.ongoing == {7: 2}
    assert follower.aborted_transactions(0, 3) == [(7, 0)]
    marker(leader, 7, commit=True)                                      # 3
    follower.append_as_follower(bytes(leader.read(3, 1 << 20).records[0]))
    assert follower.producers.ongoing == {} and follower.first_unstable_offset(4) is None
    # The follower loses offsets >= 3 (the commit marker): 7's transaction is open again.
    follower.truncate_to(3)
    assert follower.producers.ongoing == {7: 2}
    assert follower.producers.get(7).current_txn_first_offset == 2
    assert follower.first_unstable_offset(3) == 2
    # Losing the abort marker too: both transactions were never decided, one open from 0.
    follower.truncate_to(1)
    assert follower.producers.ongoing == {7: 0} and follower.aborted_transactions(0, 9) == []


def test_delete_records_drops_index_entries_below_the_log_start():
    log = new_log()
    txn(log, 7, 0, b"a")
    marker(log, 7, commit=False)
    log.append_as_leader(client_batch([b"plain"]), 0)
    log.delete_records_before(2)
    assert log.aborted_transactions(2, 3) == []
