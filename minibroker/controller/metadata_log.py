"""The metadata log: the cluster's durable record of every controller decision.

It outlives controllers (like KRaft's quorum log): every controller-eligible broker holds a copy
(quorum.py), and a new controller replays its own.
Records are stored encoded, so replay proves they survive the wire format.

Snapshots (KRaft's): once `metadata.log.max.record.bytes.between.snapshots` record bytes were
appended after the last snapshot, the controller hands its image over (`maybe_snapshot`) and the
records up to it are dropped; a replay starts from the snapshot's image and reads the records
after it. Offsets stay absolute (a reassignment's id is its record's offset). With a
MetadataStore (serve --data-dir) the copy is also on disk and loaded from there. Each record
keeps the epoch of the leader that appended it (Raft compares them; controller/raft.py).
"""
from __future__ import annotations

from typing import Any, Iterator

from minibroker.controller.image import MetadataImage
from minibroker.controller.metadata_store import Entry, Epoched, MetadataStore
from minibroker.protocol import records as R


class MetadataLog:
    def __init__(self, store: MetadataStore | None = None) -> None:
        self.store = store
        self.snapshot: MetadataImage | None = None     # the image up to offset base - 1
        self.snapshot_epoch = 0                         # the epoch of its last record
        self.base = 0
        self._entries: list[Entry] = []
        self._epochs: list[int] = []                    # the epoch each record was appended in
        if store is not None:
            self.snapshot, self.snapshot_epoch, self.base, self._entries, self._epochs = \
                store.load()
        self.bytes_since_snapshot = sum(len(e[2]) for e in self._entries)
        self.snapshots = 0                              # taken since this copy was made

    def next_offset(self) -> int:
        return self.base + len(self._entries)

    def append(self, record: Any, epoch: int = 0) -> int:
        """`epoch`: the leader's that appends it (the in-process quorum's, or Raft's)."""
        version = record.version if record.version is not None else record.max_version
        return self.append_entry((type(record).__name__, version,
                                  bytes(record.encode(version=version))), epoch)

    def entry(self, offset: int) -> Entry:
        return self._entries[offset - self.base]

    def epoch_at(self, offset: int) -> int:
        """The epoch of the record at `offset` (-1 before the first; the snapshot's below base)."""
        if offset < 0:
            return -1
        if offset < self.base:
            return self.snapshot_epoch
        return self._epochs[offset - self.base]

    def records(self, start: int, end: int) -> list[Epoched]:
        """(epoch, entry) of the records from `start` to `end` (start >= base)."""
        return list(zip(self._epochs[start - self.base:end - self.base],
                        self._entries[start - self.base:end - self.base]))

    def append_entry(self, entry: Entry, epoch: int = 0) -> int:
        """A record as another voter's copy holds it (replication copies the encoded bytes)."""
        offset = self.next_offset()
        self._entries.append(entry)
        self._epochs.append(epoch)
        self.bytes_since_snapshot += len(entry[2])
        if self.store is not None:
            self.store.write(offset, [(epoch, entry)])
        return offset

    def write_from(self, offset: int, records: list[Epoched]) -> None:
        """The records from `offset` on become `records` (a tail that diverged from the
        leader's, or proposed again under a new epoch): on disk one append, so a process killed
        meanwhile leaves the old tail or the new one."""
        del self._entries[offset - self.base:], self._epochs[offset - self.base:]
        self._epochs.extend(epoch for epoch, _ in records)
        self._entries.extend(entry for _, entry in records)
        self.bytes_since_snapshot = sum(len(e[2]) for e in self._entries)
        if self.store is not None:
            self.store.write(offset, records)

    def relabel(self, start: int, epoch: int) -> None:
        """The records from `start` on, of `epoch` from now on (a new leader's uncommitted tail)."""
        start = max(start, self.base)
        if any(e != epoch for e in self._epochs[start - self.base:]):
            self.write_from(start, [(epoch, entry) for _, entry in
                                    self.records(start, self.next_offset())])

    def flush(self) -> None:
        if self.store is not None:
            self.store.flush()

    def maybe_snapshot(self, image: MetadataImage, max_bytes: int) -> bool:
        """Snapshot `image` if enough was appended since the last one and it covers this whole
        copy (a copy that lags, or is ahead, keeps its records)."""
        if self.bytes_since_snapshot < max_bytes or image.offset + 1 != self.next_offset():
            return False
        epoch = self.epoch_at(image.offset)
        self.snapshot, self.snapshot_epoch, self.base = image, epoch, image.offset + 1
        self._entries, self._epochs = [], []
        self.bytes_since_snapshot = 0
        self.snapshots += 1
        if self.store is not None:
            self.store.write_snapshot(image, epoch)
        return True

    def catch_up(self, leader: "MetadataLog") -> None:
        """Become the leader's copy: from where both agree on, the leader's records (all of
        its copy if the two do not share the same snapshot)."""
        if self.base != leader.base or self.snapshot != leader.snapshot:
            self.replace(leader.snapshot, leader.base, leader.records(leader.base, len(leader)),
                         leader.snapshot_epoch)
            return
        mine, theirs = self.records(self.base, len(self)), leader.records(leader.base, len(leader))
        same = 0
        for a, b in zip(mine, theirs):
            if a != b:
                break
            same += 1
        if same < len(mine) and same == len(theirs):   # only cut back: nothing to write over it
            self.replace(self.snapshot, self.base, theirs, self.snapshot_epoch)
        elif same < len(theirs):
            self.write_from(self.base + same, theirs[same:])

    def replace(self, snapshot: MetadataImage | None, base: int, records: list[Epoched],
                snapshot_epoch: int) -> None:
        """Become a copy of another voter's (its snapshot and the records after it)."""
        self.snapshot, self.snapshot_epoch, self.base = snapshot, snapshot_epoch, base
        self._epochs = [epoch for epoch, _ in records]
        self._entries = [entry for _, entry in records]
        self.bytes_since_snapshot = sum(len(e[2]) for e in self._entries)
        if self.store is not None:
            self.store.replace(snapshot, snapshot_epoch, base, records)

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
