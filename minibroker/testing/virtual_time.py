"""A selector event loop on virtual time: when nothing is ready, jump to the next timer.

A one-hour asyncio.sleep returns at once; real sockets still work, because the loop first polls
them without blocking and only jumps the clock when no I/O is ready (loopback TCP between two
sockets of the same loop is delivered inside the sending syscall, so "nothing readable" really
means "nobody has sent anything"). A loop with no timers and no ready I/O would sleep forever:
that is a deadlock, and we raise instead.

While work handed to an executor thread (`run_in_executor`, e.g. getaddrinfo for a host name) is
running, the loop cannot know when that thread will answer, so it waits for real and advances
its clock by the real time waited: time never jumps past a thread's reply.
"""
from __future__ import annotations

import asyncio
import selectors
import time
import weakref


class VirtualTimeDeadlock(RuntimeError):
    """Nothing can ever happen again: no ready callbacks, no timers, no I/O, no threads."""


class RealTimeLimitExceeded(Exception):
    """The loop ran longer in real time than its `real_time_limit` (a livelock in virtual time:
    busy callbacks that never let the clock reach the test's own timeouts)."""


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self, loop_ref) -> None:
        super().__init__()
        self._loop_ref = loop_ref

    def select(self, timeout=None):
        loop = self._loop_ref()
        if loop._real_deadline is not None and time.monotonic() > loop._real_deadline:
            loop._real_deadline = None          # once: the loop must still run its cleanup
            raise RealTimeLimitExceeded(
                f"virtual-time loop ran over {loop.real_time_limit} s of real time "
                f"(virtual clock at {loop.time():.3f} s)")
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if loop._executor_jobs:
            # A thread works for us: wait for real (its reply arrives through the self-pipe),
            # and let virtual time follow real time meanwhile.
            start = time.monotonic()
            ready = super().select(0.05 if timeout is None else min(timeout, 0.05))
            loop.advance(time.monotonic() - start if ready or timeout is None
                         else min(timeout, 0.05))
            return ready
        # Loopback I/O from the same loop is already in the kernel; give other threads (a client
        # library's IO thread) a brief real chance before jumping, if asked to.
        ready = super().select(0.0005 if loop.real_io_grace else 0)
        if ready:
            return ready
        if timeout is None:
            if loop.deadlock_is_error and not loop.real_io_grace:
                raise VirtualTimeDeadlock(
                    "virtual-time loop deadlocked: no ready callbacks, no timers, no ready I/O")
            return super().select(0.01)
        loop.advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self, start: float = 0.0, deadlock_is_error: bool = True,
                 real_io_grace: bool = False, real_time_limit: float | None = None) -> None:
        """real_time_limit: raise RealTimeLimitExceeded out of run_forever()/run_until_complete()
        once the loop has existed for that many real seconds (exceptions raised in callbacks are
        swallowed by asyncio, so a watchdog signal cannot stop a livelocked loop; this can)."""
        self._virtual_now = start
        self.real_time_limit = real_time_limit
        self._real_deadline = None if real_time_limit is None else time.monotonic() + real_time_limit
        self._executor_jobs = 0
        self.deadlock_is_error = deadlock_is_error
        self.real_io_grace = real_io_grace
        super().__init__(_VirtualSelector(weakref.ref(self)))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._virtual_now += seconds

    def run_in_executor(self, executor, func, *args):
        fut = super().run_in_executor(executor, func, *args)
        self._executor_jobs += 1
        fut.add_done_callback(self._executor_job_done)
        return fut

    def _executor_job_done(self, _fut) -> None:
        self._executor_jobs -= 1

    async def shutdown_default_executor(self, *args) -> None:
        # Joins the executor in a helper thread that answers through call_soon_threadsafe.
        self._executor_jobs += 1
        try:
            await super().shutdown_default_executor(*args)
        finally:
            self._executor_jobs -= 1
