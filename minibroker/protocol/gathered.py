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
with the encoded bytes, and the follower finds it by its bytes (twins.py).
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

    def records_at(self, pos: int) -> list[memoryview] | None:
        """The views cut out at frame[base:]'s offset `pos`, or None."""
        return self.holes.get(pos + self.base)

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
