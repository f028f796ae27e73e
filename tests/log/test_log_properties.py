"""Property: any sequence of appends, truncations and DeleteRecords keeps the log contiguous, and reads
return exactly the appended bytes with their offsets and leader epochs patched (hypothesis prints the
failing example and its seed)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from log_helpers import client_batch, new_log

from minibroker.log.batch import parse_batches, patch_batch
from minibroker.log.partition_log import BATCH_OVERHEAD, SPILLED_BATCH_OVERHEAD
from minibroker.log.spill import SpillFile

ops = st.lists(st.one_of(
    st.tuples(st.just("append"), st.lists(st.integers(1, 4), min_size=1, max_size=3), st.integers(0, 2)),
    st.tuples(st.just("truncate"), st.floats(0, 1)),
    st.tuples(st.just("delete"), st.floats(0, 1)),
    st.tuples(st.just("retention"), st.integers(0, 400)),
    st.tuples(st.just("spill"), st.integers(0, 3000)),     # past log.memory.max.bytes
), max_size=60)


def expected_bytes(model):
    return [bytes(b) for _, b in model]


@settings(max_examples=200, deadline=None)
@given(ops)
def test_random_operations_keep_log_consistent(operations):
    log = new_log(retention_ms=-1)
    log.memory.spill.min_bytes = 0
    model: list[tuple[int, bytearray]] = []       # (base offset, expected stored batch)
    lso = leo = 0
    epoch = 0
    for op in operations:
        if op[0] == "append":
            _, counts, bump = op
            epoch += bump
            raws = [client_batch([b"r%d" % i for i in range(n)], ts=leo) for n in counts]
            res = log.append_as_leader(b"".join(raws), epoch)
            assert res.base_offset == leo
            for raw in raws:
                stored = bytearray(raw)
                patch_batch(stored, 0, leo, epoch)
                model.append((leo, stored))
                leo += parse_batches(raw)[0].records_count
            assert res.last_offset == leo - 1
        elif op[0] == "truncate":
            target = lso + int(op[1] * (leo - lso))
            log.truncate_to(target)
            if target < leo:
                kept = [(b, s) for b, s in model if b + parse_batches(s)[0].last_offset_delta < target]
                leo = min(target, model[len(kept)][0]) if len(kept) < len(model) else target
                model = kept
                lso = min(lso, leo)
        elif op[0] == "delete":
            target = lso + int(op[1] * (leo - lso))
            assert log.delete_records_before(target) == max(lso, target)
            lso = max(lso, target)
            model = [(b, s) for b, s in model if b + parse_batches(s)[0].last_offset_delta >= lso]
        elif op[0] == "spill":          # the oldest batches to a file, read from there after
            log.spill_to(op[1], log.memory.spill)
        else:
            limit = op[1]
            log.config = log.config.__class__(retention_ms=-1, retention_bytes=limit)
            log.apply_retention(now_ms=0)
            while model and sum(len(s) for _, s in model) - len(model[0][1]) >= limit:
                model.pop(0)
            if model and model[0][0] > lso:
                lso = model[0][0]
            elif not model:
                lso = max(lso, leo)
        assert (log.log_start_offset, log.log_end_offset) == (lso, leo)
        assert log.size_bytes == sum(len(s) for _, s in model)
        spilled = {b for b, e in zip(log._bases[log._head:], log._stored[log._head:])
                   if type(e) is SpillFile}
        # reads past _spilled_below take the list as it is: no spilled batch may be there
        assert not any(type(e) is SpillFile for e in log._stored[log._spilled_below:])
        assert log.held_bytes == sum(SPILLED_BATCH_OVERHEAD if b in spilled else
                                     len(s) + BATCH_OVERHEAD for b, s in model) == log.memory.used
        got = log.read(lso, 1 << 30).records
        assert [bytes(v) for v in got] == expected_bytes(model)
        for k in {0, len(model) // 2, len(model) - 1} if model else ():   # one batch (KIP-74)
            one = log.read(max(model[k][0], lso), 1)
            assert [bytes(v) for v in one.records] == [bytes(model[k][1])]
            assert one.first_offset == model[k][0]
        headers = parse_batches(b"".join(got))                       # CRCs still valid
        for prev, nxt in zip(headers, headers[1:]):
            assert nxt.base_offset == prev.last_offset + 1           # contiguous
        if headers:
            assert headers[-1].last_offset + 1 == leo
        for h in headers:                                             # epoch cache agrees with the batches
            assert log.epochs.epoch_for_offset(max(h.base_offset, lso)) == h.partition_leader_epoch
    # a follower copying the leader ends up byte-identical
    follower = new_log()
    follower.truncate_fully_and_start_at(lso)
    for view in log.read(lso, 1 << 30).records:
        follower.append_as_follower(view)
    assert [bytes(v) for v in follower.read(lso, 1 << 30).records] == expected_bytes(model)
    assert follower.log_end_offset == leo
    log.memory.close()
