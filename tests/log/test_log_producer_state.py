from __future__ import annotations

import pytest
from kafka.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError

from minibroker.log.batch import INT32_MAX, build_batch, parse_batches
from minibroker.log.producer_state import BatchMetadata, ProducerStateManager


def hdr(pid=1, epoch=0, seq=0, n=1):
    return parse_batches(build_batch([(None, b"v", [])] * n, producer_id=pid, producer_epoch=epoch,
                                     base_sequence=seq, timestamp=7))[0]


def test_in_sequence_appends_and_duplicates():
    ps = ProducerStateManager("t-0")
    assert ps.check_and_record(hdr(seq=0, n=2), 0) is None
    assert ps.check_and_record(hdr(seq=2, n=3), 2) is None
    assert ps.check_and_record(hdr(seq=0, n=2), 99) == BatchMetadata(0, 1, 0, 1, 7)
    assert ps.check_and_record(hdr(seq=2, n=3), 99) == BatchMetadata(2, 4, 2, 4, 7)
    assert ps.get(1).last_seq == 4 and ps.get(1).last_offset == 4


def test_only_last_five_batches_are_remembered():
    ps = ProducerStateManager()
    for i in range(6):
        ps.check_and_record(hdr(seq=i), i)
    assert [b.first_seq for b in ps.get(1).batches] == [1, 2, 3, 4, 5]
    with pytest.raises(OutOfOrderSequenceNumberError):
        ps.check_and_record(hdr(seq=0), 10)        # too old to be recognised as a duplicate
    assert ps.check_and_record(hdr(seq=1), 10) == BatchMetadata(1, 1, 1, 1, 7)


def test_gap_is_out_of_order():
    ps = ProducerStateManager()
    ps.check_and_record(hdr(seq=0), 0)
    with pytest.raises(OutOfOrderSequenceNumberError, match="Out of order sequence number"):
        ps.check_and_record(hdr(seq=2), 1)


def test_epochs():
    ps = ProducerStateManager()
    ps.check_and_record(hdr(epoch=3, seq=0), 0)
    with pytest.raises(InvalidProducerEpochError):
        ps.check_and_record(hdr(epoch=2, seq=1), 1)
    with pytest.raises(OutOfOrderSequenceNumberError, match="new epoch"):
        ps.check_and_record(hdr(epoch=4, seq=1), 1)
    assert ps.check_and_record(hdr(epoch=4, seq=0), 1) is None
    assert ps.get(1).producer_epoch == 4 and len(ps.get(1).batches) == 1
    assert ps.check_and_record(hdr(epoch=3, seq=0), 2, origin="replication") is None   # followers record anything


def test_unknown_producer_accepts_any_sequence():
    ps = ProducerStateManager()
    assert ps.check_and_record(hdr(pid=9, seq=42), 0) is None
    assert ps.get(9).last_seq == 42


def test_sequence_wraps_at_int32_max():
    ps = ProducerStateManager()
    ps.check_and_record(hdr(seq=INT32_MAX - 1, n=2), 0)
    assert ps.get(1).last_seq == INT32_MAX
    assert ps.check_and_record(hdr(seq=0), 2) is None


def test_prepare_does_not_mutate_and_sees_earlier_batches_of_the_append():
    ps = ProducerStateManager()
    ps.check_and_record(hdr(seq=0), 0)
    good, bad = hdr(seq=1), hdr(seq=5)
    with pytest.raises(OutOfOrderSequenceNumberError):
        ps.prepare([good, bad], [1, 2])
    assert ps.get(1).last_seq == 0
    pending = ps.prepare([good, hdr(seq=2)], [1, 2])
    assert ps.get(1).last_seq == 0
    ps.commit(pending)
    assert ps.get(1).last_seq == 2
    assert ps.prepare([hdr(seq=3), hdr(seq=3)], [3, 4]).duplicate == BatchMetadata(3, 3, 3, 3, 7)


def test_transaction_marker_moves_the_epoch_only():
    from minibroker.log.batch import build_control_batch
    ps = ProducerStateManager()
    ps.check_and_record(hdr(epoch=1, seq=0), 0)
    marker = parse_batches(build_control_batch(True, 1, 2))[0]
    assert ps.check_and_record(marker, 1, origin="coordinator") is None
    assert (ps.get(1).producer_epoch, list(ps.get(1).batches)) == (2, [])
    with pytest.raises(InvalidProducerEpochError):
        ps.check_and_record(parse_batches(build_control_batch(True, 1, 1))[0], 2, origin="coordinator")
