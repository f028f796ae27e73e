"""KIP-179 draft: PartitionAssignmentStatus — each target replica's progress, polled from the
brokers (the leader's log bounds and each new replica's log end offset). See reassignment.py."""
from __future__ import annotations

from typing import Awaitable, Callable, NamedTuple

from minibroker.controller.image import MetadataImage, Reassignment
from minibroker.controller.reassignment import (NO_REASSIGNMENT_IN_PROGRESS,
                                                UNKNOWN_TOPIC_OR_PARTITION)
from minibroker.protocol import errors as ours

IN_PROGRESS = ours.PARTITION_REASSIGNMENT_IN_PROGRESS

# (broker id, topic, partition) -> (log start offset, log end offset), (None, None) if unknown
LogBounds = Callable[[int, str, int], Awaitable[tuple[int | None, int | None]]]


class Progress(NamedTuple):
    topic: str
    partition: int
    broker: int
    error_code: int
    numerator: int
    denominator: int


async def progress(image: MetadataImage, ra: Reassignment,
                   log_bounds: LogBounds) -> list[Progress]:
    """Each target replica's progress, asking leaders and new replicas for their log bounds."""
    out = []
    parts = []
    for (topic_id, pid), (target, original) in ra.partitions.items():
        t = image.topic_by_id(topic_id)
        parts.append((t.name if t is not None else str(topic_id), pid, topic_id, t, target,
                      original))
    for name, pid, topic_id, t, target, original in sorted(parts, key=lambda x: x[:2]):
        reg = t.partitions.get(pid) if t is not None else None
        if (topic_id, pid) in ra.gone or reg is None:
            out += [Progress(name, pid, b, UNKNOWN_TOPIC_OR_PARTITION, 0, -1) for b in target]
            continue
        if (topic_id, pid) in ra.cancelled:
            out += [Progress(name, pid, b, 0, 1, 1) if b in original else
                    Progress(name, pid, b, NO_REASSIGNMENT_IN_PROGRESS, 0, -1) for b in target]
            continue
        start, end = (await log_bounds(reg.leader, name, pid)) if reg.leader >= 0 \
            else (None, None)
        size = None if start is None or end is None else end - start + 1
        moved = (topic_id, pid) in ra.done
        for b in target:
            if moved or b in original:
                out.append(Progress(name, pid, b, 0, size or 1, size or 1))
                continue
            _, leo = await log_bounds(b, name, pid)
            held = 0 if leo is None or start is None or end is None else \
                min(max(leo - start, 0), end - start)
            joined = 1 if b in reg.isr else 0
            out.append(Progress(name, pid, b, IN_PROGRESS, held + joined,
                                -1 if size is None else size))
    return out
