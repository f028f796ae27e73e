"""The logs kept out of Python's cycle collector.

A broker holds a StoredBatch per stored batch (millions, for single-record writes) in two lists per
log. A full collection walks every object the collector tracks, and one runs each time the tracked
long-lived objects grow by a quarter: 300,000 single-record RF 3 writes to a served cluster cost 86
full collections of up to 0.35 s each (13 s in all, every broker stopped).

None of these objects can be part of a reference cycle: a StoredBatch refers to bytes, read-only
views and ints; the lists to StoredBatches, ints and None. CPython's PyObject_GC_UnTrack, which C
extensions call for such objects, takes them off the collector's lists; reference counting still
frees them. The same writes then took full collections of 3 ms (median), 0.3 s in all.

The ctypes call (~0.2 us in a loop, more when cold) is made for small batches in runs of 256, off
the path of most writes; until then a batch is tracked, which is only slower, and kept alive (at
most 256 x 4 KiB). A large batch is untracked at once. Where ctypes cannot reach the C API (not
CPython), everything stays tracked.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable, TypeVar

RUN = 256


def _untracker() -> Callable[[Any], None]:
    try:
        untrack = ctypes.pythonapi.PyObject_GC_UnTrack
    except AttributeError:
        return lambda obj: None
    untrack.argtypes, untrack.restype = (ctypes.py_object,), None
    return untrack


untrack = _untracker()
_pending: list[Any] = []
_L = TypeVar("_L", bound="list[Any]")


def untracked(items: _L) -> _L:
    """`items`, untracked: only for lists that never hold what could refer back to them."""
    untrack(items)
    return items


def untrack_soon(obj: Any) -> None:
    _pending.append(obj)
    if len(_pending) >= RUN:
        untrack_pending()


def untrack_pending() -> None:
    global _pending
    objs, _pending = _pending, []
    for obj in objs:
        untrack(obj)
