"""A broker's logs on disk (Kafka's LogManager): one directory per partition under the broker's
log directory, and the broker-wide checkpoint files beside them.

    <dir>/<topic>-<partition>/                 segments (log/segments.py), leader-epoch-checkpoint,
                                              partition.metadata (the topic id)
    <dir>/recovery-point-offset-checkpoint    up to where each log was last flushed
    <dir>/replication-offset-checkpoint       each partition's high watermark
    <dir>/log-start-offset-checkpoint         each log's start offset (DeleteRecords)

The three checkpoints are written every `replica.high.watermark.checkpoint.interval.ms` and at a
clean shutdown (Kafka writes the last two on their own, longer, intervals); logs whose flush.ms
has passed are flushed on the same tick. A partition directory whose partition.metadata names
another topic id (the topic was deleted and created again while this broker was down) is
deleted when the partition is opened. Directories of partitions this broker no longer hosts
are not looked for (Kafka deletes such stray logs at start).
"""
from __future__ import annotations

import logging
import os
import shutil
import uuid
from typing import Any

from minibroker.log.config import LogConfig
from minibroker.log.disk_log import DiskPartitionLog, checkpoint_text, read_checkpoint, write_atomically
from minibroker.log.memory import LogMemory

log = logging.getLogger("minibroker.log")

RECOVERY_POINT = "recovery-point-offset-checkpoint"
HIGH_WATERMARK = "replication-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
PARTITION_METADATA = "partition.metadata"


def _offsets(path: str) -> dict[tuple[str, int], int]:
    out = {}
    for entry in read_checkpoint(path):
        if len(entry) == 3 and entry[1].isdigit():
            out[(entry[0], int(entry[1]))] = int(entry[2])
    return out


class LogManager:
    def __init__(self, directory: str, clock: Any, memory: LogMemory) -> None:
        self.directory = directory
        self.clock = clock
        self.memory = memory
        os.makedirs(directory, exist_ok=True)
        self.recovery_points = _offsets(os.path.join(directory, RECOVERY_POINT))
        self.high_watermarks = _offsets(os.path.join(directory, HIGH_WATERMARK))
        self.start_offsets = _offsets(os.path.join(directory, LOG_START_OFFSET))
        self.logs: dict[tuple[str, int], DiskPartitionLog] = {}

    def open_log(self, topic: str, partition: int, config: LogConfig,
                 topic_id: uuid.UUID) -> DiskPartitionLog:
        key = (topic, partition)
        path = os.path.join(self.directory, f"{topic}-{partition}")
        metadata = os.path.join(path, PARTITION_METADATA)
        expected = f"version: 0\ntopic_id: {topic_id}\n"
        if os.path.exists(metadata):
            with open(metadata) as f:
                found = f.read()
            if found != expected:
                log.info("%s: a log of another topic id, deleted (%r)", path, found)
                shutil.rmtree(path)
                for offsets in (self.recovery_points, self.high_watermarks, self.start_offsets):
                    offsets.pop(key, None)
        disk_log = DiskPartitionLog(
            topic, partition, config, self.clock, path, memory=self.memory,
            recovery_point=self.recovery_points.get(key, 0),
            log_start_offset=self.start_offsets.get(key, 0),
            high_watermark=self.high_watermarks.get(key, 0))
        if not os.path.exists(metadata):
            write_atomically(metadata, expected)
        self.logs[key] = disk_log
        return disk_log

    def forget(self, disk_log: Any) -> None:
        """A deleted log (it removed its own directory)."""
        key = (disk_log.topic, disk_log.partition)
        if self.logs.get(key) is disk_log:
            del self.logs[key]

    def checkpoint(self) -> None:
        """Flush the logs whose flush.ms passed, then write the three checkpoint files."""
        now = self.clock.now_ms()
        logs = [self.logs[k] for k in sorted(self.logs)]
        for disk_log in logs:
            if now - disk_log.last_flush_ms >= disk_log.config.flush_ms and disk_log.unflushed_messages:
                disk_log.flush()
            disk_log.write_epochs()
        self._write(RECOVERY_POINT, [(d.topic, d.partition, d.recovery_point) for d in logs])
        self._write(HIGH_WATERMARK, [(d.topic, d.partition, d.high_watermark_of()) for d in logs])
        self._write(LOG_START_OFFSET, [(d.topic, d.partition, d.log_start_offset) for d in logs])

    def _write(self, name: str, entries: list[tuple[str, int, int]]) -> None:
        write_atomically(os.path.join(self.directory, name), checkpoint_text(entries))

    def close(self) -> None:
        """A clean shutdown: every log flushed, the checkpoints written."""
        for key in sorted(self.logs):
            self.logs[key].flush()
        self.checkpoint()
