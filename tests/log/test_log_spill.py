"""log.memory.overflow=spill (the default): past log.memory.max.bytes the oldest batches of the
largest logs move to segment files and are read from there; nothing is deleted, no offset moves,
the bytes read are the bytes produced, and the memory counted falls to the fair shares. Files go
when their batches are all deleted; the directory goes when the memory is closed (broker stop)."""
from __future__ import annotations

import asyncio
import errno
import gc
import os
import time
import tracemalloc

import pytest

from log_helpers import FixedClock, client_batch

from minibroker.log.config import LogConfig
from minibroker.log.memory import LogMemory
from minibroker.log.partition_log import (BATCH_OVERHEAD, SPILLED_BATCH_OVERHEAD, PartitionLog,
                                          SpilledBatch)
from minibroker.log.spill import SpillDir, SpillFile
from minibroker.log.untracked import untrack_pending

SIZE = len(client_batch([b"x" * 1000])) + BATCH_OVERHEAD     # what one stored batch holds


def _logs(memory: LogMemory, n: int) -> list[PartitionLog]:
    memory.spill.min_bytes = 0          # exact shares here (test_a_spill_file_holds_at_least...)
    return [PartitionLog("t", i, LogConfig(retention_ms=-1), FixedClock(), memory=memory)
            for i in range(n)]


def _fill(log: PartitionLog, batches: int) -> list[bytes]:
    values = [b"%d-%d-" % (log.partition, log.log_end_offset + i) + b"x" * 990
              for i in range(batches)]
    for v in values:
        log.append_as_leader(client_batch([v[:1000]]), 0)
    return values


def _read_all(log: PartitionLog) -> list[bytes]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        res = log.read(offset, 1 << 20)
        out += [bytes(v) for v in res.records]
        offset = log.stored_at(res.first_offset).last_offset + 1 if len(res.records) == 1 else \
            log.log_end_offset
    return out


def _spill_files(memory: LogMemory) -> list[str]:
    root = memory.spill.path
    return [] if root is None else sorted(
        os.path.join(d, f) for d, _, files in os.walk(root) for f in files)


def test_past_the_cap_the_largest_logs_spill_down_to_a_fair_share_and_keep_everything():
    memory = LogMemory()
    small, mid, big = _logs(memory, 3)
    for log, n in ((small, 2), (mid, 10), (big, 30)):
        _fill(log, n)
    before = {log.partition: _read_all(log) for log in (small, mid, big)}
    memory.max_bytes = 32 * SIZE
    spilled = memory.maybe_evict()
    # big spills down to its share of the room (18 whole batches' worth); what a spilled batch
    # still holds (its objects) counts, so a few more than 12 go
    assert spilled == -(-12 * SIZE // (SIZE - SPILLED_BATCH_OVERHEAD))
    # Nothing deleted, no offset moved, the same bytes read back (now from the file).
    assert [(log.log_start_offset, log.log_end_offset, log.batch_count)
            for log in (small, mid, big)] == [(0, 2, 2), (0, 10, 10), (0, 30, 30)]
    assert {log.partition: _read_all(log) for log in (small, mid, big)} == before
    # What the memory counts: big's oldest batches hold only their objects now.
    assert [b.held for b in big.batches_from(0)][:spilled + 1] == [SPILLED_BATCH_OVERHEAD] * spilled + [
        big.stored_at(spilled).size + BATCH_OVERHEAD]
    assert big.held_bytes <= 18 * SIZE
    assert memory.used == small.held_bytes + mid.held_bytes + big.held_bytes <= memory.max_bytes
    [path] = _spill_files(memory)
    assert path.endswith(os.path.join("t-2", "00000000000000000000.log"))
    assert os.path.getsize(path) == sum(len(v) for v in before[2][:spilled])
    memory.close()


def test_spilling_ignores_the_high_watermark_and_producers_are_not_held_back():
    """Spilled bytes stay readable, so what followers have not fetched yet may go to files."""
    memory = LogMemory(4 * SIZE)
    (a,) = _logs(memory, 1)
    a.high_watermark_of = lambda: 0
    values = _fill(a, 12)
    memory.maybe_evict()
    assert memory.used <= memory.max_bytes and not memory.over()
    assert [bytes(v) for v in a.read(0, 1 << 30).records] == _read_all(a)
    assert len(_read_all(a)) == len(values) == 12
    memory.close()


def test_a_spilled_batch_is_read_from_its_file_and_keeps_no_object_of_its_own():
    """The log keeps the SpillFile in each spilled batch's slot and reads the batch from its
    header when asked: a StoredBatch and a memoryview per spilled batch (which the collector
    walks) grew a long run by a gigabyte an hour past the cap."""
    tracemalloc.start()                 # it sees only what is allocated after this
    try:
        memory = LogMemory(4 * SIZE)
        (a,) = _logs(memory, 1)
        _fill(a, 100)
        before = [bytes(bytearray(v)) for v in _read_all(a)]   # copies: bytes(b) is b
        fields = [(b.base_offset, b.last_offset, b.size, b.leader_epoch, b.max_timestamp,
                   b.attributes, b.producer_id, b.producer_epoch, b.base_sequence)
                  for b in a.batches_from(0)]
        untrack_pending()
        gc.collect()
        tracked = len(gc.get_objects())
        held_before = tracemalloc.get_traced_memory()[0]
        spilled = memory.maybe_evict()
        gc.collect()
        freed = held_before - tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert spilled > 90
    assert {type(x) for x in a._stored[:spilled]} == {SpillFile}
    assert len({id(x) for x in a._stored[:spilled]}) == 1       # one file, shared
    # Their bytes went, and their objects: a StoredBatch kept per spilled batch, with a view of
    # the file (184 bytes), gave back ~920 bytes each here, less than the batch.
    assert freed > spilled * (SIZE - BATCH_OVERHEAD + 100)
    assert len(gc.get_objects()) - tracked < 30     # the directory's and file's, not per batch
    batches = list(a.batches_from(0))
    assert all(type(b) is SpilledBatch for b in batches[:spilled])
    assert [(b.base_offset, b.last_offset, b.size, b.leader_epoch, b.max_timestamp,
             b.attributes, b.producer_id, b.producer_epoch, b.base_sequence)
            for b in batches] == fields
    assert {b.held for b in batches[:spilled]} == {SPILLED_BATCH_OVERHEAD}
    assert memory.used == a.held_bytes == spilled * SPILLED_BATCH_OVERHEAD + sum(
        b.held for b in batches[spilled:])
    assert _read_all(a) == before
    assert bytes(batches[0].data) == bytes(batches[0].view) == before[0]
    assert a.stored_at(5).base_offset == 5 and a.stored_at(5).last_offset == 5
    with pytest.raises(AttributeError):
        batches[0].view = b""
    memory.close()


def test_a_spilled_file_goes_with_its_last_batch_and_the_directory_at_close():
    memory = LogMemory(2 * SIZE)
    (a,) = _logs(memory, 1)
    _fill(a, 6)
    memory.maybe_evict()
    _fill(a, 6)
    memory.maybe_evict()
    files = _spill_files(memory)
    assert len(files) == 2
    first_file_end = next(b.base_offset for b in a.batches_from(0)
                          if b.base_offset == int(os.path.basename(files[1])[:20]))

    def collected():        # small batches are kept in a run of 256 until untracked
        untrack_pending()
        gc.collect()
    a.delete_records_before(1)
    collected()
    assert len(_spill_files(memory)) == 2       # the first file still holds later batches
    a.delete_records_before(first_file_end)
    collected()
    assert _spill_files(memory) == files[1:]
    root = memory.spill.path
    memory.close()
    assert not os.path.exists(root)
    # Mapped batches outlive the directory: still readable until deleted.
    assert len(_read_all(a)) == a.batch_count


def test_truncation_then_new_batches_at_the_same_offsets_spill_to_a_new_file():
    """A follower truncated into spilled batches gets new ones at the same offsets; spilling
    them must not overwrite the mapped file the old batches (still read by a Fetch) are in."""
    memory = LogMemory(2 * SIZE)
    (a,) = _logs(memory, 1)
    _fill(a, 6)
    memory.maybe_evict()
    held_by_a_reader = a.read(0, 1 << 20).records[0]
    old = bytes(held_by_a_reader)
    a.truncate_to(0)
    values = _fill(a, 6)
    memory.maybe_evict()
    assert bytes(held_by_a_reader) == old
    assert len(_read_all(a)) == len(values)
    assert len(_spill_files(memory)) == 2
    memory.close()


def test_accounting_after_spilling_follows_truncation_retention_and_removal():
    memory = LogMemory(3 * SIZE)
    a, b = _logs(memory, 2)
    _fill(a, 8)
    _fill(b, 8)
    memory.maybe_evict()
    a.truncate_to(5)
    b.config = LogConfig(retention_ms=-1, retention_bytes=0)
    b.apply_retention(0)
    assert memory.used == a.held_bytes + b.held_bytes
    a.delete()
    b.delete()
    assert memory.used == 0
    memory.close()


def test_a_spill_file_holds_at_least_min_bytes_or_all_the_log_has():
    """Each file is a mapping and mappings are bounded (vm.max_map_count): a log just over its
    share spills a few MiB at once, not a batch a file."""
    memory = LogMemory(8 * SIZE)
    (a,) = _logs(memory, 1)
    memory.spill.min_bytes = 6 * (SIZE - BATCH_OVERHEAD)
    _fill(a, 10)
    memory.maybe_evict()
    [path] = _spill_files(memory)
    assert os.path.getsize(path) >= 6 * (SIZE - BATCH_OVERHEAD) - 100
    memory.close()


def test_a_spill_that_cannot_be_written_keeps_the_batches_in_memory(caplog, tmp_path):
    memory = LogMemory(2 * SIZE)
    (a,) = _logs(memory, 1)
    memory.spill.parent = str(tmp_path / "gone")       # no such directory: mkdtemp fails
    values = _fill(a, 6)
    memory.maybe_evict()
    assert len(_read_all(a)) == len(values) and a.log_start_offset == 0
    assert memory.used == a.held_bytes > memory.max_bytes
    assert any("cannot spill t-0" in r.getMessage() for r in caplog.records)
    memory.close()


class _Batch:
    def __init__(self, data: bytes, base_offset: int) -> None:
        self.view = memoryview(data)
        self.size = len(data)
        self.base_offset = self.last_offset = base_offset


def _write(spill: SpillDir, sizes: list[int]) -> tuple[list[bytes], list[memoryview], str]:
    datas = [os.urandom(n) for n in sizes]
    views = spill.write("t", 0, [_Batch(d, i) for i, d in enumerate(datas)])
    path = _spill_files_in(spill.path)[-1]
    return datas, views, path


def _spill_files_in(root: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files)


@pytest.mark.parametrize("direct", [True, False])
def test_a_spill_file_holds_exactly_the_batches_bytes_written_direct_or_buffered(tmp_path, direct):
    # O_DIRECT goes through an aligned buffer in whole blocks: batches that straddle the buffer's
    # end and a tail that is no whole block must come out byte for byte, the file cut to size.
    spill = SpillDir(str(tmp_path))
    spill.direct = direct and spill.direct
    sizes = [1, 4095, 4097, 3 << 20, 2 << 20, 12345, 61]      # past the 4 MiB buffer
    datas, views, path = _write(spill, sizes)
    assert [bytes(v) for v in views] == datas
    with open(path, "rb") as f:
        assert f.read() == b"".join(datas)
    datas, views, _ = _write(spill, [8192])                  # a whole block, then a reused buffer
    assert [bytes(v) for v in views] == datas
    spill.close()


def test_a_file_system_that_refuses_o_direct_gets_buffered_writes(tmp_path, monkeypatch):
    real_open = os.open

    def refusing(path, flags, *args):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing)
    spill = SpillDir(str(tmp_path))
    datas, views, _ = _write(spill, [100, 5000])
    assert [bytes(v) for v in views] == datas and spill.direct is False
    spill.close()


async def _settled(memory: LogMemory) -> None:
    # Bounded in real time: the writer is a real thread, and these tests' loop may run on
    # virtual time, where 3,000 sleeps of 10 ms took a second and lost to a loaded disk.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if memory.spill.in_flight == 0:
            return
        await asyncio.sleep(0.01)
        time.sleep(0.001)                   # the thread's turn, whatever the loop's clock
    raise AssertionError(f"the spill writer did not finish: {memory.spill.in_flight} {memory.spill._writer}")


async def test_a_broker_spills_in_the_writer_thread_and_counts_the_bytes_until_written():
    # On a running loop the file is written by the spill thread: the batches stay in memory,
    # counted, until then; a batch deleted meanwhile is left as the deletion left it.
    memory = LogMemory(4 * SIZE)
    (a,) = _logs(memory, 1)
    _fill(a, 12)
    before = _read_all(a)
    used = memory.used
    picked = memory.maybe_evict()
    assert picked > 0 and memory.spill.in_flight > 0 and memory.used == used
    assert memory.maybe_evict() == 0                # not picked twice while being written
    a.truncate_to(a.log_end_offset - 1)             # the newest batch goes meanwhile
    await _settled(memory)
    assert memory.used == a.held_bytes <= memory.max_bytes
    assert _read_all(a) == before[:-1]
    held = [b.held for b in a.batches_from(0)]
    assert 0 < picked < len(held) == 11
    assert held[:picked] == [SPILLED_BATCH_OVERHEAD] * picked       # the picked were written
    assert min(held[picked:]) > BATCH_OVERHEAD                      # the rest are in memory
    memory.close()


async def test_producers_wait_while_the_writer_has_more_than_a_quarter_of_the_cap_to_write():
    memory = LogMemory(8 * SIZE)
    (a,) = _logs(memory, 1)
    _fill(a, 24)
    assert not memory.over()                        # nothing being written: nothing to wait for
    assert memory.maybe_evict() > 0                 # 2x the cap handed to the writer at once
    assert memory.over()
    await asyncio.wait_for(memory.room(5), 10)      # woken when the writes bring it under
    await _settled(memory)
    assert not memory.over() and memory.used <= memory.max_bytes
    memory.close()


async def test_a_write_that_fails_in_the_writer_thread_leaves_the_batches_to_be_picked_again(
        monkeypatch):
    memory = LogMemory(4 * SIZE)
    (a,) = _logs(memory, 1)
    _fill(a, 12)
    before = _read_all(a)
    monkeypatch.setattr(memory.spill, "write", lambda *args: 1 / 0)     # not an OSError
    assert memory.maybe_evict() > 0
    await _settled(memory)
    assert memory.used > memory.max_bytes and _read_all(a) == before    # all still in memory
    monkeypatch.undo()
    memory._threshold = memory.max_bytes
    assert memory.maybe_evict() > 0                 # picked again, and written this time
    await _settled(memory)
    assert memory.used <= memory.max_bytes and _read_all(a) == before
    memory.close()
