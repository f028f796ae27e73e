"""Partition logs on disk (log/disk_log.py): Kafka's file layout, reopening rebuilds the same log,
torn tails are cut at the last whole batch, retention and truncation work on segments."""
from __future__ import annotations

import os
import uuid

from log_helpers import FixedClock, client_batch, decode

from minibroker.log.batch import build_control_batch
from minibroker.log.config import LogConfig
from minibroker.log.disk_log import DiskPartitionLog
from minibroker.log.log_manager import LogManager
from minibroker.log.memory import LogMemory


def open_log(path, **config) -> DiskPartitionLog:
    return DiskPartitionLog("t", 0, LogConfig(**config), FixedClock(), str(path))


def values(log) -> list[bytes]:
    return [r[3] for v in log.read(log.log_start_offset, 1 << 30).records for r in decode(v)]


def files(path) -> list[str]:
    return sorted(os.listdir(path))


def test_batches_are_written_as_held_and_read_back_on_open(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    for i in range(6):
        log.append_as_leader(client_batch([b"v%d" % i, b"w%d" % i]), leader_epoch=3 + i // 3)
    held = [bytes(v) for v in log.read(0, 1 << 30).records]
    assert len(log.segments) > 1
    names = files(tmp_path)
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names
    assert "00000000000000000000.timeindex" in names and "leader-epoch-checkpoint" in names
    on_disk = b"".join(open(tmp_path / n, "rb").read() for n in names if n.endswith(".log"))
    assert on_disk == b"".join(held)            # the raw bytes, not re-encoded
    again = open_log(tmp_path, segment_bytes=300)
    assert [bytes(v) for v in again.read(0, 1 << 30).records] == held
    assert (again.log_start_offset, again.log_end_offset) == (0, 12)
    assert again.epochs.entries == log.epochs.entries
    assert again.truncated_bytes == 0


def test_torn_tail_is_cut_at_the_last_whole_batch(tmp_path):
    log = open_log(tmp_path)
    for i in range(3):
        log.append_as_leader(client_batch([b"v%d" % i]), leader_epoch=0)
    segment = tmp_path / "00000000000000000000.log"
    whole = segment.stat().st_size
    with open(segment, "r+b") as f:                 # half of the last batch lost
        f.truncate(whole - 10)
    again = open_log(tmp_path)
    assert values(again) == [b"v0", b"v1"] and again.log_end_offset == 2
    assert segment.stat().st_size < whole - 10
    again.append_as_leader(client_batch([b"v2 again"]), leader_epoch=0)
    assert values(open_log(tmp_path)) == [b"v0", b"v1", b"v2 again"]


def test_garbage_after_the_last_batch_and_a_bad_crc_are_cut(tmp_path):
    log = open_log(tmp_path)
    for i in range(3):
        log.append_as_leader(client_batch([b"v%d" % i]), leader_epoch=0)
    segment = tmp_path / "00000000000000000000.log"
    with open(segment, "ab") as f:
        f.write(os.urandom(100))
    assert values(open_log(tmp_path)) == [b"v0", b"v1", b"v2"]
    size = segment.stat().st_size
    with open(segment, "r+b") as f:                 # a flipped byte in the last batch's records
        f.seek(size - 2)
        byte = f.read(1)
        f.seek(size - 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert values(open_log(tmp_path)) == [b"v0", b"v1"]


def test_producer_state_and_transactions_come_back(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(client_batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=0), 0)
    log.append_as_leader(client_batch([b"t"], producer_id=8, producer_epoch=0, base_sequence=0,
                                      transactional=True), 0)
    log.append_as_leader(client_batch([b"u"], producer_id=9, producer_epoch=0, base_sequence=0,
                                      transactional=True), 0)
    log.append_as_leader(build_control_batch(False, 9, 0), 0, origin="coordinator")
    again = open_log(tmp_path)
    retry = again.append_as_leader(
        client_batch([b"a"], producer_id=7, producer_epoch=0, base_sequence=0), 0)
    assert retry.duplicate and retry.base_offset == 0
    assert again.first_unstable_offset(again.log_end_offset) == 1   # pid 8's open transaction
    assert again.aborted_transactions(0, 10) == [(9, 2)]


def test_truncation_retention_and_delete_records_work_on_files(tmp_path):
    log = open_log(tmp_path, segment_bytes=200, retention_bytes=400, retention_ms=-1)
    for i in range(8):
        log.append_as_leader(client_batch([b"x" * 40]), leader_epoch=0)
    segments = len(log.segments)
    assert log.apply_retention(now_ms=0) > 0
    assert len(log.segments) < segments
    assert min(int(n[:20]) for n in files(tmp_path) if n.endswith(".log")) == log.log_start_offset
    log.truncate_to(6)
    assert log.log_end_offset == 6
    again = open_log(tmp_path, segment_bytes=200)
    assert (again.log_start_offset, again.log_end_offset) == (log.log_start_offset, 6)


def test_log_manager_checkpoints_and_a_recreated_topic_starts_empty(tmp_path):
    clock = FixedClock()
    first, second = uuid.uuid4(), uuid.uuid4()
    manager = LogManager(str(tmp_path), clock, LogMemory())
    log = manager.open_log("t", 0, LogConfig(), first)
    for i in range(4):
        log.append_as_leader(client_batch([b"v%d" % i]), leader_epoch=0)
    log.high_watermark_of = lambda: 3
    log.delete_records_before(1)
    manager.close()
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"
    again = LogManager(str(tmp_path), clock, LogMemory()).open_log("t", 0, LogConfig(), first)
    assert (again.log_start_offset, again.log_end_offset) == (1, 4)
    assert again.recovered_high_watermark == 3 and again.recovery_point == 4
    fresh = LogManager(str(tmp_path), clock, LogMemory()).open_log("t", 0, LogConfig(), second)
    assert fresh.log_end_offset == 0 and values(fresh) == []
