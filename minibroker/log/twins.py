"""A follower's batch that its leader, in this process, already holds: stored once, shared.

Brokers of one process replicate over memory pipes (network/memory.py): a follower receives each
batch in a Fetch response like any follower and, where the leader's log holds a batch at that
base offset with the same bytes (one memcmp), keeps the leader's bytes instead of the received
copy. Those bytes passed the leader's CRC check when they were produced (base offset and leader
epoch lie outside the CRC), so only batches without a twin have their CRC checked again. The received buffer is freed at once and reused by the next
transfer, so three replicas fault in one copy of each byte, not three. Stored batches are never
written after they are stored (patching happens before), so sharing them is safe; a broker
counts a shared batch against its own log.memory.max.bytes as the leader does (with its share of
the frame holding it), as it may be the last to let it go.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable

_memcmp: Callable[[int | None, int | None, int], int] | None     # c_void_p takes None (NULL)
try:
    _memcmp = ctypes.CDLL(None).memcmp
    _memcmp.restype = ctypes.c_int
    _memcmp.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
except (OSError, AttributeError):           # no C library to ask: nothing is shared
    _memcmp = None


def _address(buf: Any) -> int | None:
    """Where a writable buffer's bytes start, or None (read-only: not compared)."""
    if isinstance(buf, memoryview) and (buf.readonly or not buf.contiguous):
        return None
    try:
        c = ctypes.c_char.from_buffer(buf)
    except (TypeError, ValueError):
        return None
    try:
        return ctypes.addressof(c)
    finally:
        del c                               # it holds an export of the buffer


def same_bytes(a: Any, b: Any) -> bool:
    """Whether two writable buffers hold the same bytes (a memoryview compares item by item,
    ~35x slower than a copy)."""
    if _memcmp is None or len(a) != len(b):
        return False
    pb = _address(b)
    pa = _address(a) if pb is not None else None
    return pa is not None and (len(a) == 0 or _memcmp(pa, pb, len(a)) == 0)


def twin(leader_log: Any, base_offset: int, data: Any) -> Any:
    """The leader's StoredBatch at `base_offset` if it holds exactly `data` (a received batch),
    else None. A small frame's batch is a read-only view of a receive buffer that is reused: the
    leader's bytes (a small batch's, StoredBatch) or bytearray compare with it (a memcmp), and
    sharing the leader's batch saves the follower its own copy and any view of it."""
    b = leader_log.stored_at(base_offset)
    if b is None:
        return None
    held = b.data
    if type(held) is bytes:         # a small batch (StoredBatch): a copy of 4 KiB at most
        return b if len(held) == len(data) and held == bytes(data) else None
    if isinstance(data, memoryview) and data.readonly:
        return b if type(held) is bytearray and held == data else None
    return b if same_bytes(held, data) else None
