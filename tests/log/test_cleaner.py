"""Compaction of one PartitionLog (log/cleaner.py): latest value per key, offsets and timestamps
kept, CRCs valid, tombstones dropped only after delete.retention.ms, never at or above the high
watermark nor in the active segment, compressed batches rewritten in their codec."""
from __future__ import annotations

import pytest

from minibroker.log import cleaner
from minibroker.log.batch import parse_batches

from tests.log.log_helpers import FixedClock, client_batch, decode
from minibroker.log.config import LogConfig
from minibroker.log.partition_log import PartitionLog

COMPACT = dict(cleanup_policy="compact", min_cleanable_dirty_ratio=0.01, segment_ms=100,
               delete_retention_ms=1000)


def new_log(**config):
    clock = FixedClock()
    return PartitionLog("t", 0, LogConfig(**{**COMPACT, **config}), clock), clock


def records(log):
    out = []
    for view in log.read(log.log_start_offset, 1 << 30).records:
        parse_batches(bytes(view))                       # the CRC and lengths are right
        out += [(o, t, k, v if v is None else v.rstrip(b".")) for o, t, k, v in decode(view)]
    return out


def append(log, clock, pairs, compression=0, advance=200):
    clock.now += advance                                 # past segment.ms: each append rolls
    keys = [k for k, _ in pairs]
    # values padded so that codecs compress (kafka-python sends small batches uncompressed)
    values = [v if v is None else v + b"." * 200 for _, v in pairs]
    log.append_as_leader(client_batch(values, keys=keys, ts=clock.now,
                                      compression=compression), 0)


@pytest.mark.parametrize("compression", [0, 1, 3, 4])
def test_keeps_the_latest_value_of_each_key_with_its_offset(compression):
    log, clock = new_log()
    append(log, clock, [(b"a", b"a0"), (b"b", b"b0"), (b"c", b"c0")], compression)
    append(log, clock, [(b"a", b"a1"), (b"b", None)], compression)           # b deleted
    append(log, clock, [(b"c", b"c1"), (b"a", b"a2")], compression)
    append(log, clock, [(b"d", b"d0")], compression)                         # the active segment
    before = records(log)
    codecs = {bytes(v[:8]): v[22] & 0x07 for v in log.read(0, 1 << 30).records}
    hw = log.log_end_offset
    assert cleaner.needs_cleaning(log, clock.now, hw)
    result = cleaner.clean(log, clock.now, hw)
    assert result.records_removed == 4 and result.batches_dropped == 1
    after = records(log)
    assert [(o, k, v) for o, _, k, v in after] == [(4, b"b", None), (5, b"c", b"c1"),
                                                   (6, b"a", b"a2"), (7, b"d", b"d0")]
    # timestamps survive the rewrite, and the log's offsets do not move
    stamps = {o: t for o, t, _, _ in before}
    assert all(t == stamps[o] for o, t, _, _ in after)
    assert (log.log_start_offset, log.log_end_offset) == (0, 8)
    assert log.read(1, 1 << 20).first_offset == 3    # the next batch left (base 3, record 4)
    codecs_after = {bytes(v[:8]): v[22] & 0x07 for v in log.read(0, 1 << 30).records}
    assert codecs_after == {k: v for k, v in codecs.items() if k in codecs_after}   # codec kept
    assert compression == 0 or compression in codecs_after.values()
    assert not cleaner.needs_cleaning(log, clock.now, hw)

    # the tombstone goes once delete.retention.ms has passed since the cleaning that kept it
    clock.now += 999
    assert not cleaner.needs_cleaning(log, clock.now, hw)
    clock.now += 1
    assert cleaner.needs_cleaning(log, clock.now, hw)
    cleaner.clean(log, clock.now, hw)
    assert [(o, k) for o, _, k, _ in records(log)] == [(5, b"c"), (6, b"a"), (7, b"d")]


def test_never_cleans_at_or_above_the_high_watermark_nor_the_active_segment():
    log, clock = new_log()
    for i in range(5):
        append(log, clock, [(b"k", b"%d" % i)])
    assert cleaner.cleanable_end(log, clock.now, 2) == 2
    cleaner.clean(log, clock.now, 2)
    assert [o for o, _, _, _ in records(log)] == [1, 2, 3, 4]
    # one segment for everything (segment.ms not reached): nothing is cleanable
    log2, clock2 = new_log(segment_ms=10**9)
    for i in range(5):
        append(log2, clock2, [(b"k", b"%d" % i)])
    assert cleaner.cleanable_end(log2, clock2.now, 5) == 0
    assert not cleaner.needs_cleaning(log2, clock2.now, 5)


def test_min_compaction_lag_and_dirty_ratio():
    log, clock = new_log(min_compaction_lag_ms=500)
    for i in range(4):
        append(log, clock, [(b"k", b"%d" % i)])
    # batches at now-600, -400, -200, 0: only the first is old enough
    assert cleaner.cleanable_end(log, clock.now, 4) == 1
    log2, clock2 = new_log(min_cleanable_dirty_ratio=0.9)
    for i in range(3):
        append(log2, clock2, [(b"k", b"%d" % i)])
    cleaner.clean(log2, clock2.now, 3)
    append(log2, clock2, [(b"k", b"x")])
    append(log2, clock2, [(b"j", b"y")])
    # clean part: 1 batch; dirty: 1 batch (the next is the last one) -> ratio 0.5 < 0.9
    assert not cleaner.needs_cleaning(log2, clock2.now, 5)


def test_transactional_batches_are_left_alone():
    log, clock = new_log()
    clock.now += 200
    log.append_as_leader(client_batch([b"t0"], keys=[b"k"], ts=clock.now, producer_id=7,
                                      producer_epoch=0, base_sequence=0, transactional=True), 0)
    append(log, clock, [(b"k", b"1")])
    append(log, clock, [(b"k", b"2")])
    append(log, clock, [(b"z", b"z")])
    cleaner.clean(log, clock.now, log.log_end_offset)
    assert [(o, v) for o, _, _, v in records(log)] == [(0, b"t0"), (2, b"2"), (3, b"z")]


def test_spilled_batches_compact_as_those_in_memory_and_keep_their_delete_horizon():
    """Batches past log.memory.max.bytes are read from their spill file (log/spill.py); the
    cleaner rewrites them into memory and a kept tombstone's horizon is the file's to keep."""
    log, clock = new_log()
    log.memory.spill.min_bytes = 0
    append(log, clock, [(b"a", b"a0"), (b"b", b"b0")])
    append(log, clock, [(b"b", None), (b"c", b"c0")])                # b deleted
    append(log, clock, [(b"a", b"a1")])
    append(log, clock, [(b"d", b"d0")])                              # the active segment
    before = records(log)
    assert log.spill_to(0, log.memory.spill) == 4
    assert records(log) == before                                    # read from the file
    hw = log.log_end_offset
    cleaner.clean(log, clock.now, hw)
    assert [(o, k) for o, _, k, _ in records(log)] == [(2, b"b"), (3, b"c"), (4, b"a"), (5, b"d")]
    log.spill_to(0, log.memory.spill)                                # the rewritten, spilled again
    assert log.stored_at(2).delete_horizon == clock.now + 1000       # kept with the file
    clock.now += 1000
    assert cleaner.needs_cleaning(log, clock.now, hw)
    cleaner.clean(log, clock.now, hw)
    assert [(o, k) for o, _, k, _ in records(log)] == [(3, b"c"), (4, b"a"), (5, b"d")]
    assert log.held_bytes == log.memory.used
    log.memory.close()
