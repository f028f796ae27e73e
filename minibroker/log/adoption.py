"""Which received record sets a log keeps where they arrived, and what it counts for them.

A large frame (protocol/framing.py's FrameReader hands it over writable) may be kept rather than
copied: a Produce request's batches by the leader's logs, a Fetch response's by a follower's. What
such a slice costs is the log's memory accounting (PartitionLog's `adopt`, log/memory.py's cap),
so the rule lives here, beside the log, not in the transport's framing.
"""
from __future__ import annotations

from collections.abc import Iterable, Sized
from typing import cast


def _keepable(data: object) -> bool:
    return isinstance(data, memoryview) and not data.readonly \
        and 4 * data.nbytes >= len(_owner(data))


def _owner(view: memoryview) -> Sized:
    """The buffer a frame's slice views (FrameReader's bytearray of that frame)."""
    return cast(Sized, view.obj)


def frame_records(record_sets: Iterable[object]) -> int:
    """The record sets one frame carries (a Produce request's or a Fetch response's partitions),
    judged together as protocol.framing.handed_over judges one: the bytes of those to keep where
    they are, or 0 (copy them all). Kept are the writable slices of a large frame that are each at
    least a quarter of it, when together they are at least half of it. PartitionLog then counts
    the frame once across the logs that keep its slices (each its part of the frame's other
    bytes); a slice kept after the others were deleted keeps at most four times what it counts
    alive. A producer's request to a broker leading two partitions carries two batches of about
    half the frame each, and so does a follower's fetch of them: neither passed handed_over, and
    both were copied."""
    total = 0
    owner = None
    for data in record_sets:
        if isinstance(data, memoryview) and _keepable(data):
            if owner is not None and _owner(data) is not owner:
                return 0
            owner = _owner(data)
            total += data.nbytes
    return total if owner is not None and 2 * total >= len(owner) else 0


def adoption(data: object, frame_total: int) -> int:
    """PartitionLog's `adopt` for one of the record sets `frame_records` gave `frame_total` for."""
    return frame_total if frame_total and _keepable(data) else 0
