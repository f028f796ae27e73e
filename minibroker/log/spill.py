"""Where in-memory logs put their oldest batches past `log.memory.max.bytes` (log.memory.overflow
=spill, the default): segment files in a directory of their own, read back through mmap.

A spill writes a run of one log's oldest batches, as the raw bytes they hold (the format of a
Kafka `.log` segment and of log/segments.py), to `<dir>/<topic>-<partition>/<base offset>.log`,
maps the file read-only and hands each batch a read-only view of its bytes in the mapping: the
batch's StoredBatch keeps its place and its metadata, the read path (PartitionLog.read, a Fetch)
is unchanged, and the pages are the kernel's page cache, which it writes back and drops under
memory pressure instead of the process's own memory. A file is unlinked once nothing refers to
its mapping (every batch in it deleted by retention, truncation or the topic's deletion); the
directory is created at the first spill (a temporary one, `minibroker-spill-*`, under TMPDIR)
and removed when the broker stops, or at exit.
"""
from __future__ import annotations

import logging
import mmap
import os
import shutil
import tempfile
import weakref
from typing import Any, Sequence

log = logging.getLogger("minibroker.log")

REPORT_EVERY = 1000                     # failed spills per ERROR line
MIN_FILE_BYTES = 4 << 20


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass            # the directory went first (the broker stopped)


class SpillDir:
    def __init__(self, parent: str | None = None) -> None:
        self.parent = parent
        self.path: str | None = None
        self.files = 0                  # spill files written, in all
        self.bytes = 0                  # bytes written to them, in all
        self.failures = 0               # spills that could not be written (OSError)
        # The least a spill file holds (unless its log has less): each file is a mapping, and
        # a process has a bounded number of them (vm.max_map_count, 65530 by default).
        self.min_bytes = MIN_FILE_BYTES
        self._finalizer: weakref.finalize[..., Any] | None = None

    def _directory(self) -> str:
        if self.path is None:
            self.path = tempfile.mkdtemp(prefix="minibroker-spill-", dir=self.parent)
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)
            log.info("log memory past log.memory.max.bytes: spilling the oldest batches to %s",
                     self.path)
        return self.path

    def write(self, topic: str, partition: int, batches: Sequence[Any]) -> list[memoryview]:
        """Write `batches` (StoredBatches, in offset order) to a new segment file and return a
        read-only view of each one's bytes in its mapping."""
        folder = os.path.join(self._directory(), f"{topic}-{partition}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{batches[0].base_offset:020d}.log")
        n = 0
        while os.path.exists(path):     # a file of the same base still mapped (a truncation)
            n += 1
            path = os.path.join(folder, f"{batches[0].base_offset:020d}.{n}.log")
        with open(path, "wb") as f:
            f.writelines(b.view for b in batches)
        with open(path, "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        weakref.finalize(mapped, _unlink, path)
        whole = memoryview(mapped)
        views = []
        pos = 0
        for b in batches:
            views.append(whole[pos:pos + b.size])
            pos += b.size
        whole.release()
        self.files += 1
        self.bytes += pos
        return views

    def failed(self, topic: str, partition: int, e: OSError) -> None:
        """A spill that could not be written: the batches stay in memory (nothing is dropped),
        one ERROR line per REPORT_EVERY failures."""
        self.failures += 1
        if self.failures % REPORT_EVERY == 1:
            log.error("cannot spill %s-%d past log.memory.max.bytes to %s: %r (%d failures so "
                      "far); its batches stay in memory", topic, partition, self.path, e,
                      self.failures)

    def close(self) -> None:
        """Remove the directory and what is in it (mappings still open keep their pages: the
        batches stay readable); a later spill makes a new one."""
        if self._finalizer is not None:
            self._finalizer()
        self.path = self._finalizer = None
