"""The metadata log: the cluster's durable record of every controller decision.

It outlives controllers (like KRaft's quorum log): every controller-eligible broker holds a copy
(quorum.py), and a new controller replays its own.
Records are stored encoded, so replay proves they survive the wire format.
"""
from __future__ import annotations

from typing import Any, Iterator

from minibroker.protocol import records as R


class MetadataLog:
    def __init__(self) -> None:
        self._entries: list[tuple[str, int, bytes]] = []

    def next_offset(self) -> int:
        return len(self._entries)

    def append(self, record: Any) -> int:
        version = record.version if record.version is not None else record.max_version
        self._entries.append((type(record).__name__, version, bytes(record.encode(version=version))))
        return len(self._entries) - 1

    def entry(self, offset: int) -> tuple[str, int, bytes]:
        return self._entries[offset]

    def append_entry(self, entry: tuple[str, int, bytes]) -> int:
        """A record as another voter's copy holds it (replication copies the encoded bytes)."""
        self._entries.append(entry)
        return len(self._entries) - 1

    def catch_up(self, leader: "MetadataLog") -> None:
        """Become the leader's copy: cut back to where both agree, then copy the rest."""
        mine, theirs = self._entries, leader._entries
        same = 0
        for a, b in zip(mine, theirs):
            if a != b:
                break
            same += 1
        del mine[same:]
        mine.extend(theirs[same:])

    def read_all(self) -> Iterator[tuple[int, Any]]:
        for offset, (name, version, data) in enumerate(self._entries):
            cls = getattr(R, name)
            yield offset, cls.decode(data, version=version)

    def __len__(self) -> int:
        return len(self._entries)
