"""The metadata log: the cluster's durable record of every controller decision.

It outlives controllers (like KRaft's quorum log): every controller-eligible broker holds a copy
(quorum.py), and a new controller replays its own.
Records are stored encoded, so replay proves they survive the wire format.

Snapshots (KRaft's): once `metadata.log.max.record.bytes.between.snapshots` record bytes were
appended after the last snapshot, the controller hands its image over (`maybe_snapshot`) and the
records up to it are dropped; a replay starts from the snapshot's image and reads the records
after it. Offsets stay absolute (a reassignment's id is its record's offset). With a
MetadataStore (serve --data-dir) the copy is also on disk and loaded from there.
"""
from __future__ import annotations

from typing import Any, Iterator

from minibroker.controller.image import MetadataImage
from minibroker.controller.metadata_store import Entry, MetadataStore
from minibroker.protocol import records as R


class MetadataLog:
    def __init__(self, store: MetadataStore | None = None) -> None:
        self.store = store
        self.snapshot: MetadataImage | None = None     # the image up to offset base - 1
        self.base = 0
        self._entries: list[Entry] = []
        if store is not None:
            self.snapshot, self.base, self._entries = store.load()
        self.bytes_since_snapshot = sum(len(e[2]) for e in self._entries)
        self.snapshots = 0                              # taken since this copy was made

    def next_offset(self) -> int:
        return self.base + len(self._entries)

    def append(self, record: Any) -> int:
        version = record.version if record.version is not None else record.max_version
        return self.append_entry((type(record).__name__, version,
                                  bytes(record.encode(version=version))))

    def entry(self, offset: int) -> Entry:
        return self._entries[offset - self.base]

    def append_entry(self, entry: Entry) -> int:
        """A record as another voter's copy holds it (replication copies the encoded bytes)."""
        offset = self.next_offset()
        self._entries.append(entry)
        self.bytes_since_snapshot += len(entry[2])
        if self.store is not None:
            self.store.append(offset, entry)
        return offset

    def flush(self) -> None:
        if self.store is not None:
            self.store.flush()

    def maybe_snapshot(self, image: MetadataImage, max_bytes: int, epoch: int = 0) -> bool:
        """Snapshot `image` if enough was appended since the last one and it covers this whole
        copy (a copy that lags, or is ahead, keeps its records)."""
        if self.bytes_since_snapshot < max_bytes or image.offset + 1 != self.next_offset():
            return False
        self.snapshot, self.base, self._entries = image, image.offset + 1, []
        self.bytes_since_snapshot = 0
        self.snapshots += 1
        if self.store is not None:
            self.store.write_snapshot(image, epoch)
        return True

    def catch_up(self, leader: "MetadataLog") -> None:
        """Become the leader's copy: cut back to where both agree, then copy the rest (from the
        leader's snapshot on, if the two do not share the same one)."""
        mine, theirs = self._entries, leader._entries
        if self.base != leader.base or self.snapshot != leader.snapshot:
            self.snapshot, self.base, self._entries = leader.snapshot, leader.base, list(theirs)
            self.bytes_since_snapshot = leader.bytes_since_snapshot
            if self.store is not None:
                self.store.replace(self.snapshot, self.base, self._entries)
            return
        same = 0
        for a, b in zip(mine, theirs):
            if a != b:
                break
            same += 1
        if same < len(mine):
            del mine[same:]
            mine.extend(theirs[same:])
            if self.store is not None:
                self.store.replace(self.snapshot, self.base, mine)
        else:
            for entry in theirs[same:]:
                self.append_entry(entry)
        self.bytes_since_snapshot = sum(len(e[2]) for e in mine)

    def truncate(self, end: int) -> None:
        """Drop the records from offset `end` on (an uncommitted tail a new leader lacks)."""
        del self._entries[end - self.base:]
        self.bytes_since_snapshot = sum(len(e[2]) for e in self._entries)
        if self.store is not None:
            self.store.replace(self.snapshot, self.base, self._entries)

    def replace(self, snapshot: MetadataImage | None, base: int, entries: list[Entry]) -> None:
        """Become a copy of another voter's (its snapshot and the records after it)."""
        self.snapshot, self.base, self._entries = snapshot, base, list(entries)
        self.bytes_since_snapshot = sum(len(e[2]) for e in self._entries)
        if self.store is not None:
            self.store.replace(snapshot, base, self._entries)

    def read_all(self) -> Iterator[tuple[int, Any]]:
        """The records after the snapshot (start a replay from `snapshot`)."""
        for i, (name, version, data) in enumerate(self._entries):
            cls = getattr(R, name)
            yield self.base + i, cls.decode(data, version=version)

    @property
    def record_count(self) -> int:
        """Records held (those after the snapshot)."""
        return len(self._entries)

    def __len__(self) -> int:
        """The log end offset (snapshotted records included): how long this copy is."""
        return self.next_offset()
