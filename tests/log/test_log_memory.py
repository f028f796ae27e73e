"""log.memory.max.bytes: a broker-wide cap on the bytes its logs hold. With
log.memory.overflow=delete (the explicit opt-in to eviction), past it the oldest batches of the
largest logs go, down to an equal share of the cap less a sixteenth (a log holding less keeps
everything), never above a log's high watermark; the accounting stays equal to the logs' sizes
through truncation, retention and DeleteRecords. Spilling, the default: test_log_spill.py."""
from __future__ import annotations

from log_helpers import FixedClock, client_batch

from minibroker.log.config import LogConfig
from minibroker.log.memory import DELETE, LogMemory
from minibroker.log.partition_log import BATCH_OVERHEAD, PartitionLog

VALUE = b"x" * 1000
SIZE = len(client_batch([VALUE])) + BATCH_OVERHEAD     # what one stored batch holds


def _logs(memory: LogMemory, n: int) -> list[PartitionLog]:
    return [PartitionLog("t", i, LogConfig(retention_ms=-1), FixedClock(), memory=memory)
            for i in range(n)]


def _fill(log: PartitionLog, batches: int) -> None:
    for _ in range(batches):
        log.append_as_leader(client_batch([VALUE]), 0)


def test_the_largest_logs_give_way_down_to_a_fair_share():
    memory = LogMemory(-1, overflow=DELETE)
    small, mid, big = _logs(memory, 3)
    _fill(small, 2)
    _fill(mid, 10)
    _fill(big, 30)
    memory.max_bytes = 32 * SIZE            # 42 batches held, room for 30 after the round
    evicted = memory.maybe_evict()
    # small (2) and mid (10) hold less than a fair share of the room: big gets the other 18
    assert [small.batch_count, mid.batch_count, big.batch_count] == [2, 10, 18]
    assert evicted == 12 and big.log_start_offset == 12 and mid.log_start_offset == 0
    assert memory.used == small.held_bytes + mid.held_bytes + big.held_bytes <= memory.max_bytes


def test_under_the_cap_nothing_goes():
    memory = LogMemory(10 * SIZE, overflow=DELETE)
    (a,) = _logs(memory, 1)
    _fill(a, 10)
    assert memory.maybe_evict() == 0 and a.log_start_offset == 0
    _fill(a, 1)
    assert memory.maybe_evict() == 2 and a.batch_count == 9     # 10 - 10/16 -> 9 batches


def test_nothing_above_the_high_watermark_is_evicted():
    memory = LogMemory(0, overflow=DELETE)
    (a,) = _logs(memory, 1)
    hw = 0
    a.high_watermark_of = lambda: hw
    _fill(a, 2)
    assert memory.maybe_evict() == 0 and a.log_start_offset == 0
    hw = 1                                  # the first batch is now replicated
    # a round the high watermark stopped is not retried on every append, only a 16th of the
    # cap later (here: at the next byte)
    assert memory.maybe_evict() == 0
    _fill(a, 1)
    assert memory.maybe_evict() == 1 and a.log_start_offset == 1 and a.batch_count == 2


def test_accounting_follows_truncation_retention_delete_records_and_removal():
    memory = LogMemory()
    a, b = _logs(memory, 2)
    for i in range(6):
        (a if i % 2 else b).append_as_leader(client_batch([b"v" * (10 * i + 1)]), 0)
    a.truncate_to(1)
    b.delete_records_before(2)
    a.config = LogConfig(retention_ms=-1, retention_bytes=0)
    a.apply_retention(0)
    assert memory.used == a.held_bytes + b.held_bytes
    b.truncate_fully_and_start_at(7)
    memory.unregister(b)
    assert memory.used == a.held_bytes == 0
    memory.max_bytes = 0                    # an unregistered log is not looked at
    assert memory.maybe_evict() == 0


def test_uncapped_memory_only_counts():
    memory = LogMemory()
    (a,) = _logs(memory, 1)
    _fill(a, 3)
    assert memory.maybe_evict() == 0 and memory.used == a.held_bytes and a.log_start_offset == 0


def test_what_is_counted_is_what_is_held():
    """Issue 25: with a 10 MB cap a fuzzed broker held 107 MB. Tiny batches count their objects,
    and a batch kept inside a larger received frame (adopted) counts that whole frame."""
    memory = LogMemory()
    (a, b) = _logs(memory, 2)
    tiny = client_batch([b"x"])
    for _ in range(1000):
        a.append_as_leader(tiny, 0)
    assert memory.used == 1000 * (len(tiny) + BATCH_OVERHEAD)
    assert BATCH_OVERHEAD >= 300
    frame = bytearray(1 << 20)
    frame[:len(tiny)] = tiny
    b.append_as_leader(memoryview(frame)[:len(tiny)], 0, adopt=True)
    assert memory.used - 1000 * (len(tiny) + BATCH_OVERHEAD) == (1 << 20) + BATCH_OVERHEAD
    b.truncate_fully_and_start_at(0)
    a.delete_records_before(1000)
    assert memory.used == 0


def test_serve_default_cap_is_an_eighth_of_memory_shared_by_the_brokers_within_bounds(monkeypatch):
    import os

    from minibroker.log import memory
    pages = {"SC_PAGE_SIZE": 4096}

    def sysconf(name):
        return pages[name]
    monkeypatch.setattr(os, "sysconf", sysconf)
    gib = 1 << 30
    pages["SC_PHYS_PAGES"] = 24 * gib // 4096          # this machine: an eighth is 3 GiB...
    assert memory.default_max_bytes(1) == gib          # ...but at most 1 GiB in all
    assert memory.default_max_bytes(3) == gib // 3     # shared: not 1 GiB per broker
    assert memory.default_max_bytes(6) == gib // 6
    pages["SC_PHYS_PAGES"] = 2 * gib // 4096           # a small machine: 256 MiB shared
    assert memory.default_max_bytes(2) == 128 << 20
    assert memory.default_max_bytes(100) == 64 << 20   # but never below 64 MiB each
    pages["SC_PHYS_PAGES"] = -1                        # unknown: no cap, the library's default
    assert memory.default_max_bytes(3) == -1


def test_serve_caps_memory_by_default_and_an_override_wins():
    from minibroker import cli
    from minibroker.cli import serve
    from minibroker.log.memory import default_max_bytes
    served = serve._config(cli.parser().parse_args(["serve", "--port", "0"]))
    assert served.log_memory_max_bytes == default_max_bytes(3) != -1
    unbounded = serve._config(cli.parser().parse_args(
        ["serve", "--port", "0", "--override", "log.memory.max.bytes=-1"]))
    assert unbounded.log_memory_max_bytes == -1


def test_batches_adopted_from_one_fetch_frame_count_it_once():
    """A follower keeps the batches of a fetch response inside its frame: the frame counts once,
    split among them, not once per batch."""
    memory = LogMemory()
    (f,) = _logs(memory, 1)
    batches = b"".join(_based(client_batch([VALUE]), i) for i in range(10))
    frame = bytearray(4096) + bytearray(batches)
    f.append_as_follower(memoryview(frame)[4096:], adopt=True)
    assert f.batch_count == 10
    assert memory.used == len(frame) + 10 * BATCH_OVERHEAD


def _based(batch: bytes, offset: int) -> bytes:
    from minibroker.log.batch import patch_batch
    b = bytearray(batch)
    patch_batch(b, 0, offset, 0)
    return bytes(b)


def test_a_frame_kept_by_two_logs_counts_once():
    """Two partitions' batches of one request frame, each kept by its own log: the frame counts
    once between them (each its part of the frame's other bytes), not once per log."""
    memory = LogMemory()
    (a, b) = _logs(memory, 2)
    one = client_batch([VALUE * 40])
    frame = bytearray(100) + bytearray(one) + bytearray(one)
    view = memoryview(frame)
    kept = 2 * len(one)
    a.append_as_leader(view[100:100 + len(one)], 0, adopt=kept)
    b.append_as_leader(view[100 + len(one):], 0, adopt=kept)
    assert memory.used == len(frame) + 2 * BATCH_OVERHEAD
    a.delete_records_before(1)
    b.delete_records_before(1)
    assert memory.used == 0


async def test_producers_wait_for_room_while_the_high_watermark_holds_the_logs():
    """Past the cap with everything above the high watermark (followers behind), a producer waits
    for room; the high watermark moving lets a round free the logs and ends the wait."""
    import asyncio
    memory = LogMemory(16 * SIZE, overflow=DELETE)
    (a,) = _logs(memory, 1)
    hw = 0
    a.high_watermark_of = lambda: hw
    _fill(a, 16)
    assert not memory.over()
    _fill(a, 2)
    memory.maybe_evict()
    assert memory.over() and a.log_start_offset == 0      # nothing below the high watermark
    waiting = asyncio.ensure_future(memory.room(30))
    await asyncio.sleep(0)
    memory.high_watermark_moved()                         # moved, but not far enough
    assert not waiting.done()
    hw = 18
    memory.high_watermark_moved()
    memory.high_watermark_moved()           # coalesced: one round in the next loop pass
    await asyncio.wait_for(waiting, 1)
    assert memory.used <= memory.max_bytes and not memory.over() and a.log_start_offset > 0
    # Without a moving high watermark the wait ends at its timeout: a producer is held, not failed.
    _fill(a, 30)
    hw = 0
    a.high_watermark_of = lambda: hw
    memory.maybe_evict()
    assert memory.over()
    hw = 48                                 # replicated since the last round: no wait at all
    assert not memory.over() and memory.used <= memory.max_bytes
    _fill(a, 30)
    memory.maybe_evict()
    loop = asyncio.get_running_loop()
    start = loop.time()
    await memory.room(0.05)
    assert loop.time() - start >= 0.04 and memory.over()
