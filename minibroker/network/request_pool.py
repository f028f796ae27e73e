"""Kafka's `queued.max.request.bytes`: a memory pool for the requests being read (Kafka's
SimpleMemoryPool, not strict), one per broker, shared by its client connections.

A connection that reads the size of a large request (one that gets a buffer of its own,
protocol/framing.py FrameReader) reserves that many bytes first; with no room it stops reading
(the bytes already received stay in its small shared buffer, the rest in the kernel) until a
release wakes it, and then tries again. A reservation larger than what is left is granted
whenever anything is left, so a request bigger than the pool is not starved (Kafka's non-strict
pool). The bytes go back when the request has been read (or its connection closed). So 200
clients that each send half of a 10 MB request hold at most the pool plus a shared buffer each,
not 200 x 10 MB. -1 (Kafka's default): no pool.
"""
from __future__ import annotations

import collections
from typing import Callable


class RequestMemoryPool:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.available = capacity
        self._waiters: collections.deque[Callable[[], None]] = collections.deque()

    def try_reserve(self, size: int) -> bool:
        if self.available <= 0:
            return False
        self.available -= size
        return True

    def release(self, size: int) -> None:
        self.available += size
        # Each woken connection tries again on its next receive; those still short wait again.
        while self.available > 0 and self._waiters:
            self._waiters.popleft()()

    def wait(self, wake: Callable[[], None]) -> None:
        self._waiters.append(wake)

    def forget(self, wake: Callable[[], None]) -> None:
        try:
            self._waiters.remove(wake)
        except ValueError:
            pass

    @property
    def reserved(self) -> int:
        return self.capacity - self.available
