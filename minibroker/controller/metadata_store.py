"""One voter's copy of the metadata log on disk (KRaft's __cluster_metadata-0 directory).

    <dir>/<base offset, 20 digits>.log                      records since the latest snapshot
    <dir>/<end offset, 20 digits>-<epoch, 10 digits>.checkpoint   a snapshot: the image up to
                           end offset - 1 (controller/snapshot.py) and its last record's epoch

A record is framed as offset int64 | length int32 | crc32c uint32 | -1 int16 | epoch int32 |
version int16 | name length int16 | name | the record's encoded bytes. The epoch is that of the
leader that appended it (KRaft's partitionLeaderEpoch): Raft's vote and log matching compare it.
Frames written before records kept their epoch lack the -1 and the epoch (their body starts with
the version, never negative) and load as epoch 0, and so does a snapshot without the header line
(KRaft's SnapshotHeaderRecord) that new ones start with.

A frame goes out with one write(2) (it survives a killed process at once) and is fsynced when the
quorum commits, as KRaft flushes before a record counts as committed. A frame for an offset the
copy already holds replaces that record and those after it (a follower's divergent tail, a new
leader's tail under its epoch), so a tail is rewritten by one append. A snapshot is written to a
temporary file, fsynced and renamed, then the log starts a new file at its end offset and the
older files and snapshots are deleted. Loading takes the newest snapshot and the records after
it, and cuts a torn or corrupt tail off.
"""
from __future__ import annotations

import json
import logging
import os
import struct
from typing import NamedTuple

from minibroker.controller.image import MetadataImage
from minibroker.controller.snapshot import from_text, to_text
from minibroker.log.batch import crc32c

log = logging.getLogger("minibroker.controller")

_FRAME = struct.Struct(">qiI")
_EPOCHED = struct.Struct(">hihh")   # the epoch mark (-1), epoch, version, name length
_NAME = struct.Struct(">hh")        # a frame from before epochs: version, name length
EPOCH_MARK = -1
SNAPSHOT_VERSION = 1

Entry = tuple[str, int, bytes]      # (record class name, version, encoded record)
Epoched = tuple[int, Entry]         # (the epoch of the leader that appended it, the record)


class Loaded(NamedTuple):
    snapshot: MetadataImage | None
    snapshot_epoch: int             # the epoch of the snapshot's last record
    base: int                       # the offset of entries[0]
    entries: list[Entry]
    epochs: list[int]               # entries[i]'s epoch


def _encode(offset: int, epoch: int, entry: Entry) -> bytes:
    name, version, data = entry
    body = _EPOCHED.pack(EPOCH_MARK, epoch, version, len(name)) + name.encode() + data
    return _FRAME.pack(offset, len(body), crc32c(body)) + body


def _decode(body: bytes) -> Epoched | None:
    """The record a frame's body holds (None: too short for what it says it holds)."""
    if len(body) >= _EPOCHED.size and _NAME.unpack_from(body, 0)[0] == EPOCH_MARK:
        _, epoch, version, name_len = _EPOCHED.unpack_from(body, 0)
        start = _EPOCHED.size
    elif len(body) >= _NAME.size and _NAME.unpack_from(body, 0)[0] >= 0:
        (version, name_len), epoch, start = _NAME.unpack_from(body, 0), 0, _NAME.size
    else:
        return None
    if name_len < 0 or start + name_len > len(body):
        return None
    return epoch, (body[start:start + name_len].decode(), version, body[start + name_len:])


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
        snapshot, snapshot_epoch, base = None, 0, 0
        if snapshots:
            base, name = snapshots[-1]
            snapshot, snapshot_epoch = self._read_snapshot(name)
        entries: list[Entry] = []
        epochs: list[int] = []
        logs = self._files(".log")
        for _, name in logs:
            if not self._read_log(os.path.join(self.directory, name), base, entries, epochs):
                break
        self._open(logs[-1][1] if logs else f"{base:020d}.log")
        return Loaded(snapshot, snapshot_epoch, base, entries, epochs)

    def _read_snapshot(self, name: str) -> tuple[MetadataImage, int]:
        with open(os.path.join(self.directory, name)) as f:
            text = f.read()
        header, newline, image = text.partition("\n")
        if not newline:                 # written before snapshots kept their epoch
            return from_text(text), 0
        version = json.loads(header).get("version")
        if version != SNAPSHOT_VERSION:
            raise ValueError(f"{self.directory}/{name}: snapshot version {version} is not "
                             f"{SNAPSHOT_VERSION}")
        return from_text(image), int(name[21:31])

    @staticmethod
    def _read_log(path: str, base: int, entries: list[Entry], epochs: list[int]) -> bool:
        """Adds the file's records to `entries` / `epochs` (which start at offset `base`);
        False if it ended in a torn or corrupt frame (cut off: nothing after it counts)."""
        with open(path, "rb") as f:
            buf = f.read()
        pos, problem = 0, None
        while pos < len(buf):
            if len(buf) - pos < _FRAME.size:
                problem = "a partial frame header"
                break
            offset, length, crc = _FRAME.unpack_from(buf, pos)
            body = buf[pos + _FRAME.size:pos + _FRAME.size + length]
            record = _decode(body) if len(body) == length and crc32c(body) == crc else None
            if record is None:
                problem = f"a torn or corrupt record at offset {offset}"
                break
            end = base + len(entries)
            if offset > end:
                problem = f"offset {offset} leaves a gap after {end - 1}"
                break
            if offset >= base:          # below: a file the snapshot made obsolete
                del entries[offset - base:], epochs[offset - base:]
                epochs.append(record[0])
                entries.append(record[1])
            pos += _FRAME.size + length
        if problem is None:
            return True
        log.warning("metadata log %s: %s at byte %d; truncated there", path, problem, pos)
        os.truncate(path, pos)
        return False

    def _open(self, name: str) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = os.open(os.path.join(self.directory, name),
                           os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, offset: int, records: list[Epoched]) -> None:
        """The records from `offset` on, in one write(2): they replace any the copy held there."""
        data = memoryview(b"".join(_encode(offset + i, epoch, entry)
                                   for i, (epoch, entry) in enumerate(records)))
        while data:
            data = data[os.write(self._fd, data):]

    def flush(self) -> None:
        os.fsync(self._fd)

    def write_snapshot(self, image: MetadataImage, epoch: int) -> None:
        """The image as a snapshot (`epoch`: its last record's); the log before it goes."""
        end = image.offset + 1
        path = os.path.join(self.directory, f"{end:020d}-{epoch:010d}.checkpoint")
        with open(path + ".tmp", "w") as f:
            f.write(json.dumps({"version": SNAPSHOT_VERSION}) + "\n" + to_text(image))
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        self._restart_at(end, keep=os.path.basename(path))

    def replace(self, snapshot: MetadataImage | None, snapshot_epoch: int, base: int,
                records: list[Epoched]) -> None:
        """Become this copy (a voter catching up from the leader)."""
        if snapshot is not None:
            self.write_snapshot(snapshot, snapshot_epoch)
        else:
            self._restart_at(base, keep=None)
        self.write(base, records)
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
