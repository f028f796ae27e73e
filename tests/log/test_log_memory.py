"""log.memory.max.bytes: a broker-wide cap on the bytes its logs hold. Past it the oldest batches of
any partition go first (in store order), never above a partition's high watermark; the accounting
stays equal to the logs' sizes through truncation, retention and DeleteRecords."""
from __future__ import annotations

from log_helpers import FixedClock, client_batch

from minibroker.log.config import LogConfig
from minibroker.log.memory import LogMemory
from minibroker.log.partition_log import PartitionLog


def _logs(memory: LogMemory, n: int = 2) -> list[PartitionLog]:
    return [PartitionLog("t", i, LogConfig(retention_ms=-1), FixedClock(), memory=memory)
            for i in range(n)]


def test_oldest_batches_of_the_broker_go_first():
    memory = LogMemory()
    a, b = _logs(memory)
    size = len(client_batch([b"x" * 100]))
    memory.max_bytes = 3 * size
    for log in (a, b, a, b):
        log.append_as_leader(client_batch([b"x" * 100]), 0)
        memory.maybe_evict()
    # four stored, cap three: the first (a's offset 0) went; then b's, once a fifth arrives
    assert (a.log_start_offset, b.log_start_offset, memory.used) == (1, 0, 3 * size)
    a.append_as_leader(client_batch([b"x" * 100]), 0)
    assert memory.maybe_evict() == 1
    assert (a.log_start_offset, b.log_start_offset) == (1, 1)
    assert memory.used == a.size_bytes + b.size_bytes == 3 * size


def test_nothing_above_the_high_watermark_is_evicted():
    memory = LogMemory(0)
    (a,) = _logs(memory, 1)
    hw = 0
    a.high_watermark_of = lambda: hw
    a.append_as_leader(client_batch([b"x"]), 0)
    a.append_as_leader(client_batch([b"y"]), 0)
    assert memory.maybe_evict() == 0 and a.log_start_offset == 0
    hw = 1                                  # the first batch is now replicated
    assert memory.maybe_evict() == 1 and a.log_start_offset == 1
    assert a.batch_count == 1


def test_accounting_follows_truncation_retention_and_delete_records():
    memory = LogMemory()
    a, b = _logs(memory)
    for i in range(6):
        (a if i % 2 else b).append_as_leader(client_batch([b"v" * (10 * i + 1)]), 0)
    a.truncate_to(1)
    b.delete_records_before(2)
    a.config = LogConfig(retention_ms=-1, retention_bytes=0)
    a.apply_retention(0)
    assert memory.used == a.size_bytes + b.size_bytes
    b.truncate_fully_and_start_at(7)
    assert memory.used == a.size_bytes == 0
    # entries of batches already gone are skipped, not mistaken for the live ones
    memory.max_bytes = 0
    b.append_as_leader(client_batch([b"z"]), 0)
    assert memory.maybe_evict() == 1 and b.log_start_offset == 8 and memory.used == 0


def test_uncapped_memory_only_counts():
    memory = LogMemory()
    (a,) = _logs(memory, 1)
    for _ in range(3):
        a.append_as_leader(client_batch([b"x"]), 0)
    assert memory.maybe_evict() == 0 and memory.used == a.size_bytes and a.log_start_offset == 0
