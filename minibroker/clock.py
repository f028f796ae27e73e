"""The only source of time in minibroker.

Everything reads time through a `Clock`. It follows the running event loop's clock, so a
virtual-time loop (minibroker.testing.VirtualTimeLoop) makes the whole cluster run on virtual time.
"""
from __future__ import annotations

import asyncio
import time


# A seeded cluster's wall clock starts here (2024-01-01T00:00:00Z) unless configured: the same
# seed then gives the same timestamps (log append times, retention, session expiry).
SEEDED_WALL_BASE_MS = 1_704_067_200_000


class Clock:
    """Wall-clock milliseconds anchored once, then advanced by the event loop's monotonic clock."""

    def __init__(self, wall_base_ms: int | None = None) -> None:
        self._wall_base_ms = int(time.time() * 1000) if wall_base_ms is None else wall_base_ms
        self._loop_base: float | None = None

    @property
    def wall_base_ms(self) -> int:
        return self._wall_base_ms

    def monotonic(self) -> float:
        loop = asyncio.get_running_loop()
        if self._loop_base is None:
            self._loop_base = loop.time()
        return loop.time() - self._loop_base

    def now_ms(self) -> int:
        try:
            return self._wall_base_ms + int(self.monotonic() * 1000)
        except RuntimeError:  # no running loop (sync code in tests): time stands still
            return self._wall_base_ms

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
