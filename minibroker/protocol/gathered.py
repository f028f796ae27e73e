"""A frame handed over in memory with its stored batches by reference (network/memory.py).

A leader answers a follower's Fetch with its stored batches' read-only views among the encoded
bytes (protocol.fast.encode_fetch_response), written with writelines. Over TCP the kernel copies
them; between two brokers of one process, the memory pipe would copy them into one buffer, and
the follower would check their CRC and compare them with its leader's bytes (log/twins.py) to
keep the leader's copy. A `Gathered` frame skips all three: the pipe joins only the encoded
bytes around the views (the skeleton) and passes the views themselves, keyed by where they
were cut out. The follower's decoder (fast.decode_fetch_response) hands such a record set on as
the list of views, and its log stores the leader's batches they are (PartitionLog, by identity:
no copy, no CRC, no compare). Stored batches are never written once stored, so sharing them is
safe, as twins.py's sharing is. A small batch, stored as bytes (log/partition_log.py), is copied
with the encoded bytes, and the follower finds it by its bytes (twins.py). One record set may hold
both kinds, in any order (a follower behind fetches what was produced as it was): the decoder
takes the set's frame bytes and views together, by size (Gathered.record_set).
"""
from __future__ import annotations

import struct
from typing import NamedTuple, Sequence, final

_I32 = struct.Struct(">i")

# Below this many bytes of views a frame is copied whole: the views' bookkeeping would cost more
# than the copy, the CRC and the compare it saves.
GATHER_MIN_BYTES = 64 * 1024


@final          # readers test `type(x) is Gathered`
class Gathered(NamedTuple):
    frame: memoryview           # the frame without its size prefix and without the views
    holes: dict[int, list[memoryview]]  # offset in `frame` -> the views cut out there, in order
    size: int                   # the whole frame's, as its size prefix says
    base: int = 0               # offsets in `holes` are frame[base:]'s offsets plus base

    def record_set(self, pos: int, size: int) -> tuple[list[memoryview], int] | None:
        """The record set of `size` bytes starting at frame[base:]'s offset `pos`, when views were
        cut out of it: (its parts in order, its end in frame[base:]); None when it is all in the
        frame. A stored batch small enough to be kept as bytes (log/partition_log.py) travels
        with the encoded bytes, so a set may start, continue or end with such batches around its
        views: those parts are slices of the frame. Raises ValueError when the views do not fit
        the set's size."""
        holes, base = self.holes, self.base
        views = holes.get(pos + base)
        if views is not None and sum(v.nbytes for v in views) == size:
            return views, pos                   # the common case: one run of views, nothing else
        parts: list[memoryview] = []
        cur, need = pos + base, size
        for at in holes:                        # in frame order: gather() adds them so
            if at < cur:
                continue
            if at - cur >= need:
                break                           # a later set's views
            if at > cur:
                parts.append(self.frame[cur - base:at - base])
                need -= at - cur
            for v in holes[at]:
                parts.append(v)
                need -= v.nbytes
            if need < 0:
                raise ValueError(f"records of {size} bytes handed over as a different size")
            cur = at
        if not parts:
            return None
        if need:
            if cur - base + need > len(self.frame):
                raise ValueError(f"records of {size} bytes run past the end of the frame")
            parts.append(self.frame[cur - base:cur - base + need])
            cur += need
        return parts, cur - base

    def body(self, pos: int) -> "Gathered":
        """frame[pos:], with its views: a response's body once its header is read."""
        return Gathered(self.frame[pos:], self.holes, self.size, self.base + pos)

    def joined(self) -> bytearray:
        """The whole frame, size prefix included, as one buffer (a copy: for readers that need
        contiguous bytes)."""
        out = bytearray()
        prev = 0
        for at in sorted(self.holes):
            out += self.frame[prev:at]
            for v in self.holes[at]:
                out += v
            prev = at
        out += self.frame[prev:]
        return bytearray(_I32.pack(len(out))) + out


def gather(parts: Sequence[object]) -> Gathered | None:
    """`parts` (one writelines call) as a Gathered frame, or None to copy them whole: they must be
    exactly one frame, of immutable bytes and read-only views, with at least GATHER_MIN_BYTES of
    views. Writable buffers are never passed on: their writer may reuse them."""
    first = parts[0] if len(parts) > 2 else None     # a size prefix, views, the rest
    if type(first) is not bytes or len(first) < 4 or \
            _I32.unpack_from(first, 0)[0] < GATHER_MIN_BYTES:     # most answers: at once
        return None
    skeleton = bytearray()
    holes: dict[int, list[memoryview]] = {}
    run: list[memoryview] | None = None
    total = viewed = 0
    for part in parts:
        if type(part) is bytes:
            skeleton += part
            total += len(part)
            run = None
        elif type(part) is memoryview and part.readonly:
            if run is None:
                run = holes[len(skeleton) - 4] = []
            run.append(part)
            total += part.nbytes
            viewed += part.nbytes
        else:
            return None
    size = _I32.unpack_from(first, 0)[0]
    if viewed < GATHER_MIN_BYTES or total != 4 + size:
        return None
    return Gathered(memoryview(skeleton)[4:], holes, size)
