from __future__ import annotations

import gc
import struct
import weakref

import pytest
from kafka.errors import (
    CorruptRecordError, InvalidProducerEpochError, InvalidRecordError, MessageSizeTooLargeError,
    OffsetOutOfRangeError, OutOfOrderSequenceNumberError,
)
from log_helpers import client_batch, decode, new_log

from minibroker.log.batch import HEADER_SIZE, build_batch, build_control_batch, parse_batches
from minibroker.log.epochs import EpochEntry
from minibroker.log.partition_log import (SMALL_BATCH_BYTES, AppendResult, ReadResult,
                                          UnexpectedAppendOffsetError)
from minibroker.log.untracked import untrack_pending


def state(log):
    return (log.log_start_offset, log.log_end_offset, log.size_bytes, log.batch_count, log.epochs.entries,
            {pid: (e.producer_epoch, list(e.batches)) for pid, e in log.producers._producers.items()})


def offsets(log, start=None):
    res = log.read(log.log_start_offset if start is None else start, 1 << 30)
    return [[o for o, *_ in decode(v)] for v in res.records]


def test_append_as_leader_assigns_offsets_and_epochs():
    log = new_log()
    a, b = client_batch([b"a", b"b", b"c"]), client_batch([b"d"])
    assert log.append_as_leader(a, 5) == AppendResult(0, 2, -1, 0, False)
    assert log.append_as_leader(memoryview(b), 5) == AppendResult(3, 3, -1, 0, False)
    assert log.append_as_leader(a + b, 7) == AppendResult(4, 7, -1, 0, False)
    assert (log.log_end_offset, log.batch_count, log.size_bytes) == (8, 4, 2 * (len(a) + len(b)))
    assert log.epochs.entries == (EpochEntry(5, 0), EpochEntry(7, 4))
    assert log.last_batch_leader_epoch == 7
    assert offsets(log) == [[0, 1, 2], [3], [4, 5, 6], [7]]
    assert [h.partition_leader_epoch for h in parse_batches(b"".join(log.read(0, 1 << 20).records))] == [5, 5, 7, 7]
    assert log.end_offset_for_epoch(5) == (5, 4)
    assert log.end_offset_for_epoch(7) == (7, 8)


def test_request_buffer_reuse_does_not_affect_the_log():
    log = new_log()
    buf = bytearray(client_batch([b"hello"]))
    log.append_as_leader(memoryview(buf), 0)
    buf[:] = b"\x00" * len(buf)
    assert decode(log.read(0, 100).records[0])[0][3] == b"hello"


def test_adopted_batches_are_patched_and_kept_in_place():
    log = new_log()
    log.append_as_leader(client_batch([b"a", b"b"]), 0)
    frame = bytearray(b"hdr" + client_batch([b"hello"]) + b"tail")
    records = memoryview(frame)[3:-4]
    assert log.append_as_leader(records, 4, adopt=True) == AppendResult(2, 2, -1, 0, False)
    (_, stored) = log._live()
    assert stored.data.obj is frame                          # no copy: the caller's bytes
    (header,) = parse_batches(memoryview(frame)[3:-4])
    assert (header.base_offset, header.partition_leader_epoch) == (2, 4)   # patched where they are
    assert decode(log.read(2, 100).records[0]) == [(2, 1000, None, b"hello")]
    follower = new_log()
    follower.append_as_follower(b"".join(log.read(0, 1 << 20).records))
    leader_bytes = bytearray(b"".join(log.read(0, 1 << 20).records))
    other = new_log()
    other.append_as_follower(memoryview(leader_bytes), adopt=True)
    assert all(s.data.obj is leader_bytes for s in other._live())
    assert offsets(other) == offsets(follower) == [[0, 1], [2]]


def test_read_returns_the_stored_bytes_without_copy():
    # A small batch is stored as bytes, its own read-only view (no view and managed buffer to
    # keep); a larger one as a bytearray behind one read-only view.
    log = new_log()
    log.append_as_leader(client_batch([b"x"]), 0)
    log.append_as_leader(client_batch([b"y" * SMALL_BATCH_BYTES]), 0)
    small, large = log.read(0, 1 << 20).records
    stored_small, stored_large = log._live()
    assert type(stored_small.data) is bytes and small is stored_small.data is stored_small.view
    assert large.readonly and large.obj is stored_large.data
    assert log.read(1, 1 << 20).records[0] is large         # the same view object every time
    stored_large.data[-1] ^= 1                              # shares memory with the stored batch
    assert large[-1] == stored_large.data[-1]


def test_stored_batches_are_out_of_the_collectors_sight_and_still_kept():
    # A full collection must not walk every batch a log holds (nor the lists holding them); the
    # views they keep stay valid through collections and go with the batch when the log drops it.
    log, follower = new_log(), new_log()
    raws = [client_batch([b"x"]), client_batch([b"y" * SMALL_BATCH_BYTES])]
    for raw in raws:
        log.append_as_leader(bytearray(raw), 0)
    follower.append_as_follower(memoryview(b"".join(bytes(r) for r in log.read(0, 1 << 20).records)))
    assert not gc.is_tracked([*log._live()][1])  # a large batch at once: a run would keep it alive
    untrack_pending()                       # small ones are untracked in runs (log/untracked.py)
    stored = [*log._live(), *follower._live()]
    assert not any(gc.is_tracked(o) for o in [*stored, log._stored, follower._stored])
    assert log._bases.typecode == "q"       # machine ints: nothing in it for the collector
    view = weakref.ref(stored[1].view)
    gc.collect()
    records = log.read(0, 1 << 20).records
    assert [len(r) for r in records] == [len(r) for r in raws] and records[1] is view()
    assert bytes(records[1][HEADER_SIZE:]) == bytes(raws[1][HEADER_SIZE:])
    del records, stored
    log.replace_batches({0: None})          # compaction's rebuilt lists are untracked too
    assert not gc.is_tracked(log._stored) and log._bases.typecode == "q"
    log.truncate_to(0)
    gc.collect()
    assert view() is None


def test_read_semantics():
    log = new_log()
    sizes = []
    for n in (3, 2, 4):
        raw = client_batch([b"v"] * n)
        sizes.append(len(raw))
        log.append_as_leader(raw, 0)
    # batches: [0..2], [3..4], [5..8]
    r = log.read(4, 1 << 20)
    assert (r.first_offset, r.size, len(r.records)) == (3, sizes[1] + sizes[2], 2)
    assert log.read(4, 1 << 20, max_offset=5).size == sizes[1]            # high watermark excludes [5..8]
    assert log.read(4, 1 << 20, max_offset=4).records == []              # batch straddling the HW is held back
    assert log.read(0, sizes[0] + sizes[1]).size == sizes[0] + sizes[1]
    assert log.read(0, sizes[0] + sizes[1] - 1).size == sizes[0]
    assert log.read(0, 1).size == sizes[0]                               # KIP-74: at least one batch
    assert log.read(0, 1, min_one=False) == ReadResult([], 0, 0)
    assert log.read(9, 100) == ReadResult([], 0, 9)                      # at the LEO: empty
    for bad in (-1, 10):
        with pytest.raises(OffsetOutOfRangeError):
            log.read(bad, 100)


@pytest.mark.parametrize("mutate, error", [
    (lambda r: r[:-3], CorruptRecordError),
    (lambda r: r[:17] + bytes([r[17] ^ 1]) + r[18:], CorruptRecordError),
    (lambda r: r[:16] + b"\x01" + r[17:], InvalidRecordError),
    (lambda r: r[:8] + struct.pack(">i", -5) + r[12:], CorruptRecordError),
    (lambda r: r[:8] + struct.pack(">i", 1 << 20) + r[12:], CorruptRecordError),
])
def test_corrupt_appends_leave_the_log_unchanged(mutate, error):
    log = new_log()
    log.append_as_leader(client_batch([b"a"], producer_id=1, producer_epoch=0, base_sequence=0), 0)
    before = state(log)
    good = client_batch([b"b"], producer_id=1, producer_epoch=0, base_sequence=1)
    with pytest.raises(error):
        log.append_as_leader(good + mutate(good), 1)    # first batch fine, second bad: nothing appended
    assert state(log) == before


def test_message_too_large_and_client_rules():
    raw = client_batch([b"x" * 100])
    log = new_log(max_message_bytes=len(raw) - 1)
    with pytest.raises(MessageSizeTooLargeError, match="exceeds the maximum"):
        log.append_as_leader(raw, 0)
    assert new_log(max_message_bytes=len(raw)).append_as_leader(raw, 0).last_offset == 0
    with pytest.raises(InvalidRecordError, match="control records"):
        log.append_as_leader(build_control_batch(True, 1, 0), 0)
    assert log.append_as_leader(build_control_batch(True, 1, 0), 0, origin="coordinator").base_offset == 0


def test_idempotent_producer_through_the_log():
    log = new_log()
    b0 = client_batch([b"a", b"b"], producer_id=4, producer_epoch=0, base_sequence=0)
    b1 = client_batch([b"c"], producer_id=4, producer_epoch=0, base_sequence=2)
    assert log.append_as_leader(b0, 0) == AppendResult(0, 1, -1, 0, False)
    assert log.append_as_leader(b1, 0) == AppendResult(2, 2, -1, 0, False)
    size = log.size_bytes
    assert log.append_as_leader(b0, 0) == AppendResult(0, 1, -1, 0, True)      # retry: original offsets
    assert (log.log_end_offset, log.size_bytes) == (3, size)
    with pytest.raises(OutOfOrderSequenceNumberError):
        log.append_as_leader(client_batch([b"d"], producer_id=4, producer_epoch=0, base_sequence=9), 0)
    assert log.log_end_offset == 3


def test_empty_produce_is_invalid():
    with pytest.raises(InvalidRecordError, match="no record batch"):
        new_log().append_as_leader(b"", 0)


def test_producer_epoch_fencing():
    log = new_log()
    log.append_as_leader(client_batch([b"a"], producer_id=4, producer_epoch=3, base_sequence=0), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(client_batch([b"b"], producer_id=4, producer_epoch=2, base_sequence=1), 0)
    assert log.log_end_offset == 1


def test_log_append_time():
    log = new_log(message_timestamp_type="LogAppendTime")
    res = log.append_as_leader(client_batch([b"a", b"b"], ts=5), 0, now_ms=777)
    assert res == AppendResult(0, 1, 777, 0, False)
    (h,) = parse_batches(log.read(0, 1000).records[0])                    # CRC still valid
    assert (h.timestamp_type, h.max_timestamp) == (1, 777)
    assert [ts for _, ts, *_ in decode(log.read(0, 1000).records[0])] == [777, 777]
    assert log.append_as_leader(client_batch([b"c"]), 0).log_append_time_ms == log.clock.now_ms()
    assert log.offset_for_timestamp(700) == (0, 777)


def test_append_as_follower():
    leader, follower = new_log(), new_log()
    leader.append_as_leader(client_batch([b"a", b"b"], producer_id=1, producer_epoch=0, base_sequence=0), 2)
    leader.append_as_leader(client_batch([b"c"]), 4)
    data = b"".join(leader.read(0, 1 << 20).records)
    assert follower.append_as_follower(data[:-10]) == AppendResult(0, 1, -1, 0)    # partial tail ignored
    assert follower.append_as_follower(data[len(leader.read(0, 1).records[0]):]) == AppendResult(2, 2, -1, 0)
    assert b"".join(follower.read(0, 1 << 20).records) == data
    assert follower.epochs.entries == leader.epochs.entries == (EpochEntry(2, 0), EpochEntry(4, 2))
    assert follower.producers.get(1).last_seq == 1
    assert follower.append_as_follower(b"") == AppendResult(3, 2, -1, 0)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(data)
    bad = bytearray(data)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        new_log().append_as_follower(bad)


def test_a_follower_appends_across_a_gap_its_leaders_cleaner_left():
    # Kafka's follower append refuses only a batch below its LEO: a compacted leader drops batches
    # left empty, and a follower that fell behind fetches across the gap (it stalled here before).
    leader, follower = new_log(), new_log()
    for value in (b"a", b"b", b"c"):
        leader.append_as_leader(client_batch([value]), 0)
    follower.append_as_follower(leader.read(0, 1 << 20).records[0])
    gap = [leader.read(2, 1 << 20).records[0]]                  # batch 1 gone, as compaction does
    assert follower.append_as_follower(gap) == AppendResult(2, 2, -1, 0)
    assert follower.log_end_offset == 3 and [b.base_offset for b in follower._live()] == [0, 2]
    two = leader.read(0, 1 << 20).records
    with pytest.raises(UnexpectedAppendOffsetError):             # below the LEO
        follower.append_as_follower(two[2])
    unordered = b"".join(bytes(r) for r in (two[2], two[1]))
    with pytest.raises(UnexpectedAppendOffsetError):             # not in offset order
        new_log().append_as_follower(unordered)


def test_follower_restarts_inside_first_batch_after_delete_records():
    leader, follower = new_log(), new_log()
    leader.append_as_leader(client_batch([b"a"] * 5), 0)
    leader.delete_records_before(3)
    follower.truncate_fully_and_start_at(3)
    follower.append_as_follower(leader.read(3, 1000).records[0])
    assert (follower.log_start_offset, follower.log_end_offset, follower.batch_count) == (3, 5, 1)


def test_truncate_to():
    log = new_log()
    for epoch, n in ((1, 3), (2, 2), (3, 4)):                            # [0..2] e1, [3..4] e2, [5..8] e3
        log.append_as_leader(client_batch([b"v"] * n, producer_id=1, producer_epoch=0,
                                          base_sequence=log.log_end_offset), epoch)
    assert not log.truncate_to(9)
    assert log.truncate_to(6)                                            # inside [5..8]: whole batch goes
    assert (log.log_end_offset, log.batch_count) == (5, 2)
    assert log.epochs.entries == (EpochEntry(1, 0), EpochEntry(2, 3))
    assert log.producers.get(1).last_seq == 4                           # rebuilt from what is left
    assert log.append_as_leader(client_batch([b"v"], producer_id=1, producer_epoch=0, base_sequence=5), 4).base_offset == 5
    assert log.truncate_to(3)
    assert (log.log_end_offset, log.epochs.entries, log.producers.get(1).last_seq) == (3, (EpochEntry(1, 0),), 2)
    assert log.truncate_to(0)
    assert (log.log_end_offset, log.size_bytes, log.producers.get(1)) == (0, 0, None)


def test_truncate_below_log_start_and_fully():
    log = new_log()
    log.append_as_leader(client_batch([b"v"] * 4), 0)
    log.append_as_leader(client_batch([b"v"] * 4), 0)
    log.delete_records_before(4)
    assert log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset, log.batch_count) == (2, 2, 0)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes, log.epochs.entries) == (100, 100, 0, ())
    assert log.append_as_leader(client_batch([b"v"]), 1).base_offset == 100


def test_delete_records_before():
    log = new_log()
    for _ in range(3):
        log.append_as_leader(client_batch([b"v"] * 3), 0)                 # [0..2] [3..5] [6..8]
    size = log.size_bytes
    assert log.delete_records_before(4) == 4
    assert (log.log_start_offset, log.batch_count, log.size_bytes) == (4, 2, size * 2 // 3)
    assert log.read(4, 1000).first_offset == 3                          # the batch containing 4
    with pytest.raises(OffsetOutOfRangeError):
        log.read(3, 1000)
    assert log.delete_records_before(2) == 4                            # never moves back
    assert log.epochs.entries == (EpochEntry(0, 4),)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(10)
    assert log.delete_records_before(9) == 9
    assert (log.batch_count, log.size_bytes, log.log_end_offset) == (0, 0, 9)


def test_retention_ms():
    log = new_log(retention_ms=1000)
    for ts in (100, 5000, 200, 9000):
        log.append_as_leader(client_batch([b"v"], ts=ts), 0)
    assert log.apply_retention(now_ms=1100) == 0                        # 1000 old exactly: kept
    assert log.apply_retention(now_ms=1101) == 1                        # stops at the 5000 batch
    assert (log.log_start_offset, log.batch_count) == (1, 3)
    assert log.apply_retention(now_ms=20_000, high_watermark=3) == 2    # never past the high watermark
    assert (log.log_start_offset, log.batch_count) == (3, 1)
    assert new_log(retention_ms=-1).apply_retention(now_ms=10**15) == 0
    compact = new_log(retention_ms=0, cleanup_policy="compact")
    compact.append_as_leader(client_batch([b"v"], ts=0, keys=[b"k"]), 0)   # compacted: keyed
    assert compact.apply_retention(now_ms=10**12) == 0


def test_retention_bytes():
    one = len(client_batch([b"v"]))
    log = new_log(retention_bytes=2 * one + 1, retention_ms=-1)
    for _ in range(5):
        log.append_as_leader(client_batch([b"v"]), 0)
    assert log.apply_retention(now_ms=0) == 2                           # 5 -> 3 batches; 2 would be too few
    assert (log.log_start_offset, log.size_bytes) == (2, 3 * one)
    assert log.apply_retention(now_ms=0) == 0


def test_offset_for_timestamp_and_max_timestamp():
    log = new_log()
    assert log.offset_for_timestamp(0) is None and log.max_timestamp_offset() is None
    log.append_as_leader(client_batch([b"a", b"b", b"c"], timestamps=[10, 30, 20]), 0)
    log.append_as_leader(client_batch([b"d" * 300] * 3, timestamps=[25, 40, 15], compression=1), 0)
    assert parse_batches(log.read(3, 1).records[0])[0].compression == 1
    assert log.offset_for_timestamp(0) == (0, 10)
    assert log.offset_for_timestamp(11) == (1, 30)
    assert log.offset_for_timestamp(31) == (4, 40)                      # inside the gzip batch
    assert log.offset_for_timestamp(41) is None
    assert log.max_timestamp_offset() == (4, 40)
    log.delete_records_before(2)
    assert log.offset_for_timestamp(11) == (2, 20)
    log.append_as_leader(client_batch([b"e"], ts=40), 0)
    assert log.max_timestamp_offset() == (4, 40)                        # ties: the earliest


def test_control_batch_from_the_broker_keeps_producer_state():
    log = new_log()
    log.append_as_leader(client_batch([b"a"], producer_id=3, producer_epoch=1, base_sequence=0, transactional=True), 0)
    log.append_as_leader(build_control_batch(True, 3, 1, timestamp=5), 0, origin="coordinator")
    assert log.log_end_offset == 2
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(build_control_batch(True, 3, 0), 0, origin="coordinator")
    assert log.append_as_leader(
        client_batch([b"b"], producer_id=3, producer_epoch=1, base_sequence=1, transactional=True), 0).base_offset == 2


def test_build_batch_batches_append_like_client_ones():
    log = new_log()
    raw = build_batch([(b"k", b"v", [])] * 2, base_offset=55, leader_epoch=9)
    assert log.append_as_leader(raw, 1) == AppendResult(0, 1, -1, 0, False)


def test_a_follower_shares_the_bytes_its_leader_holds_and_copies_the_rest():
    leader, other = new_log(), new_log()
    leader.append_as_leader(bytearray(client_batch([b"a", b"b"])), 3, adopt=True)
    leader.append_as_leader(bytearray(client_batch([b"c"])), 3, adopt=True)
    other.append_as_leader(bytearray(client_batch([b"x", b"y"])), 3, adopt=True)  # offsets 0-1 too
    fetched = bytearray(b"".join(leader.read(0, 1 << 20).records))
    follower = new_log()
    follower.append_as_follower(memoryview(fetched), adopt=True, leader_log=leader)
    assert [follower.stored_at(o).data is leader.stored_at(o).data for o in (0, 2)] == [True, True]
    assert follower.held_bytes == leader.held_bytes     # counted as its own
    # Different bytes at the same offsets (another log), or a read-only view: its own copy.
    for source, records in ((other, memoryview(fetched)), (leader, memoryview(bytes(fetched)))):
        f = new_log()
        f.append_as_follower(records, adopt=not records.readonly, leader_log=source)
        assert all(f.stored_at(o).data is not source.stored_at(o).data for o in (0,))
        assert offsets(f) == [[0, 1], [2]]
    # Shared bytes outlive the leader's deleting them.
    leader.truncate_fully_and_start_at(10)
    assert offsets(follower) == [[0, 1], [2]]


@pytest.mark.parametrize("value_size, kept_as", [(1, bytes), (SMALL_BATCH_BYTES, bytearray)])
def test_a_follower_shares_its_leaders_copy_of_a_batch_received_read_only(value_size, kept_as):
    # A produce in a small frame is copied by the leader (kept as bytes up to SMALL_BATCH_BYTES);
    # a small fetch response arrives as a read-only view of a receive buffer that is reused.
    leader, other = new_log(), new_log()
    leader.append_as_leader(bytearray(client_batch([b"a" * value_size, b"b"])), 3)
    leader.append_as_leader(bytearray(client_batch([b"c"])), 3)
    other.append_as_leader(bytearray(client_batch([b"x" * value_size, b"y"])), 3)
    assert type(leader.stored_at(0).data) is kept_as
    received = memoryview(bytes(b"".join(leader.read(0, 1 << 20).records)))
    follower = new_log()
    follower.append_as_follower(received, leader_log=leader)
    assert [(follower.stored_at(o).data is leader.stored_at(o).data,
             follower.stored_at(o).view is leader.stored_at(o).view) for o in (0, 2)] == [(True, True)] * 2
    assert offsets(follower) == [[0, 1], [2]] and follower.held_bytes == leader.held_bytes
    # Other bytes at those offsets: its own copy, which outlives the receive buffer.
    f = new_log()
    f.append_as_follower(received, leader_log=other)
    assert f.stored_at(0).data is not other.stored_at(0).data
    assert type(f.stored_at(0).data) is kept_as and offsets(f) == [[0, 1], [2]]


def test_a_follower_checks_the_crc_of_what_its_leader_does_not_hold(monkeypatch):
    import minibroker.log.partition_log as partition_log
    leader = new_log()
    leader.append_as_leader(bytearray(client_batch([b"a", b"b"])), 3, adopt=True)
    leader.append_as_leader(bytearray(client_batch([b"c"])), 3, adopt=True)
    fetched = bytearray(b"".join(leader.read(0, 1 << 20).records))
    checked = []
    real = partition_log.check_crc
    monkeypatch.setattr(partition_log, "check_crc", lambda view, h: (checked.append(h.base_offset),
                                                                     real(view, h)))
    # Equal to the leader's bytes: they passed its CRC check when produced, not checked again.
    follower = new_log()
    follower.append_as_follower(memoryview(bytearray(fetched)), adopt=True, leader_log=leader)
    assert checked == [] and offsets(follower) == [[0, 1], [2]]
    # The second batch's last byte flipped (a record's value, under the CRC): not the leader's,
    # so checked, and refused with nothing appended.
    corrupt = bytearray(fetched)
    corrupt[-1] ^= 1
    follower = new_log()
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(memoryview(corrupt), adopt=True, leader_log=leader)
    assert checked == [2] and follower.log_end_offset == 0 and follower.batch_count == 0


def test_a_follower_stores_the_leaders_batches_handed_over_and_anything_else_as_bytes():
    leader = new_log()
    leader.append_as_leader(bytearray(client_batch([b"a", b"b"])), 3, adopt=True)
    leader.append_as_leader(bytearray(client_batch([b"c"])), 3, adopt=True)
    views = leader.read(0, 1 << 20).records            # the leader's StoredBatch views
    follower = new_log()
    follower.append_as_follower(list(views), leader_log=leader)
    assert [(follower.stored_at(o).data is leader.stored_at(o).data,
             follower.stored_at(o).view is leader.stored_at(o).view) for o in (0, 2)] == [(True, True)] * 2
    assert offsets(follower) == [[0, 1], [2]] and follower.held_bytes == leader.held_bytes
    # Equal bytes in other buffers (the leader's log changed since): appended as bytes, checked.
    copies = [memoryview(bytes(v)) for v in views]
    for source in (leader, None):
        f = new_log()
        f.append_as_follower(copies, leader_log=source)
        assert offsets(f) == [[0, 1], [2]]
    corrupt = [memoryview(bytes(views[0][:-1]) + bytes([views[0][-1] ^ 1]))]
    with pytest.raises(CorruptRecordError):
        new_log().append_as_follower(corrupt, leader_log=leader)
