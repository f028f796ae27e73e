"""One voter's copy of the metadata log on disk (KRaft's __cluster_metadata-0 directory).

    <dir>/<base offset, 20 digits>.log                      records since the latest snapshot
    <dir>/<end offset, 20 digits>-<epoch, 10 digits>.checkpoint   a snapshot: the image up to
                                                             end offset - 1 (controller/snapshot.py)

A record is framed as offset int64 | length int32 | crc32c uint32 | version int16 | name length
int16 | name | the record's encoded bytes, and written with one write(2) (it survives a killed
process at once) and fsynced when the quorum commits, as KRaft flushes before a record counts as
committed. A snapshot is written to a temporary file, fsynced and renamed, then the log starts a
new file at its end offset and the older files and snapshots are deleted. Loading takes the
newest snapshot and the records after it, and cuts a torn or corrupt tail off.
"""
from __future__ import annotations

import logging
import os
import struct
from typing import NamedTuple

from minibroker.controller.image import MetadataImage
from minibroker.controller.snapshot import from_text, to_text
from minibroker.log.batch import crc32c

log = logging.getLogger("minibroker.controller")

_FRAME = struct.Struct(">qiI")
_NAME = struct.Struct(">hh")

Entry = tuple[str, int, bytes]      # (record class name, version, encoded record)


class Loaded(NamedTuple):
    snapshot: MetadataImage | None
    base: int                       # the offset of entries[0]
    entries: list[Entry]


def _encode(offset: int, entry: Entry) -> bytes:
    name, version, data = entry
    body = _NAME.pack(version, len(name)) + name.encode() + data
    return _FRAME.pack(offset, len(body), crc32c(body)) + body


class MetadataStore:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._fd = -1

    def _files(self, suffix: str) -> list[tuple[int, str]]:
        return sorted((int(n[:20]), n) for n in os.listdir(self.directory)
                      if n.endswith(suffix) and n[:20].isdigit())

    def load(self) -> Loaded:
        snapshots = self._files(".checkpoint")
        snapshot, base = None, 0
        if snapshots:
            with open(os.path.join(self.directory, snapshots[-1][1])) as f:
                snapshot = from_text(f.read())
            base = snapshots[-1][0]
        entries: list[Entry] = []
        logs = self._files(".log")
        for _, name in logs:
            path = os.path.join(self.directory, name)
            with open(path, "rb") as f:
                buf = f.read()
            pos, problem = 0, None
            while pos < len(buf):
                if len(buf) - pos < _FRAME.size:
                    problem = "a partial frame header"
                    break
                offset, length, crc = _FRAME.unpack_from(buf, pos)
                body = buf[pos + _FRAME.size:pos + _FRAME.size + length]
                if length < _NAME.size or len(body) != length or crc32c(body) != crc:
                    problem = f"a torn or corrupt record at offset {offset}"
                    break
                if offset >= base + len(entries) + 1:
                    problem = f"offset {offset} leaves a gap after {base + len(entries) - 1}"
                    break
                if offset == base + len(entries):
                    version, name_len = _NAME.unpack_from(body, 0)
                    name_end = _NAME.size + name_len
                    entries.append((body[_NAME.size:name_end].decode(), version, body[name_end:]))
                pos += _FRAME.size + length
            if problem is not None:
                log.warning("metadata log %s: %s at byte %d; truncated there", path, problem, pos)
                os.truncate(path, pos)
                break
        self._open(logs[-1][1] if logs else f"{base:020d}.log")
        return Loaded(snapshot, base, entries)

    def _open(self, name: str) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(os.path.join(self.directory, name),
                           os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def append(self, offset: int, entry: Entry) -> None:
        os.write(self._fd, _encode(offset, entry))

    def flush(self) -> None:
        os.fsync(self._fd)

    def write_snapshot(self, image: MetadataImage, epoch: int = 0) -> None:
        """The image as a snapshot; the log before it goes."""
        end = image.offset + 1
        path = os.path.join(self.directory, f"{end:020d}-{epoch:010d}.checkpoint")
        with open(path + ".tmp", "w") as f:
            f.write(to_text(image))
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        self._restart_at(end, keep=os.path.basename(path))

    def replace(self, snapshot: MetadataImage | None, base: int, entries: list[Entry]) -> None:
        """Become this copy (a voter catching up from the leader)."""
        if snapshot is not None:
            self.write_snapshot(snapshot)
        else:
            self._restart_at(base, keep=None)
        for i, entry in enumerate(entries):
            self.append(base + i, entry)
        self.flush()

    def _restart_at(self, base: int, keep: str | None) -> None:
        name = f"{base:020d}.log"
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for n in os.listdir(self.directory):
            if n != keep and (n.endswith(".log") or n.endswith(".checkpoint")):
                os.unlink(os.path.join(self.directory, n))
        self._open(name)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
