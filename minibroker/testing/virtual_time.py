"""A selector event loop on virtual time: when nothing is ready, jump to the next timer.

A one-hour asyncio.sleep returns at once; real sockets still work, because the loop first polls
them without blocking and only jumps the clock when no I/O is ready. A loop with no timers and
no ready I/O would sleep forever: that is a deadlock, and we raise instead.
"""
from __future__ import annotations

import asyncio
import selectors


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self, loop_ref) -> None:
        super().__init__()
        self._loop_ref = loop_ref

    def select(self, timeout=None):
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        loop = self._loop_ref()
        # Loopback I/O from the same loop is already in the kernel; give other threads (the
        # default executor, a client library's IO thread) a brief real chance before jumping.
        ready = super().select(0.0005 if loop.real_io_grace else 0)
        if ready:
            return ready
        if timeout is None:
            if loop.deadlock_is_error and not loop.real_io_grace:
                raise RuntimeError("virtual-time loop deadlocked: no timers and no ready I/O")
            return super().select(0.01)
        loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, start: float = 0.0, deadlock_is_error: bool = True,
                 real_io_grace: bool = False) -> None:
        import weakref
        self._virtual_now = start
        self.deadlock_is_error = deadlock_is_error
        self.real_io_grace = real_io_grace
        super().__init__(_VirtualSelector(weakref.ref(self)))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._virtual_now += seconds
