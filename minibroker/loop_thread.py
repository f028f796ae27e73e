"""An asyncio service on its own event loop in a daemon thread, started and stopped synchronously.

The base of testing.ThreadedCluster and console.ThreadedConsole: callers that are not asyncio
(kafka-python tests, a benchmark) start it, use it from their own thread, and stop it. Start-up
errors are raised in the starting thread; stopping runs the service's own stop on its loop, then
closes the loop as asyncio.run does.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Self


class LoopThread:
    def __init__(self, thread_name: str, start_timeout: float) -> None:
        self._thread_name = thread_name
        self._start_timeout = start_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    async def _start(self) -> None:
        """Start the service on the thread's loop (an exception fails start())."""
        raise NotImplementedError

    async def _stop(self) -> None:
        """Stop the service, on its loop, once stop() was called."""
        raise NotImplementedError

    def start(self) -> Self:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._start())
            except BaseException as e:  # noqa: BLE001 — re-raised in the starting thread
                errors.append(e)
                ready.set()
                _finish(loop)
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._stop())
            _finish(loop)

        self._thread = threading.Thread(target=run, name=self._thread_name, daemon=True)
        self._thread.start()
        if not ready.wait(self._start_timeout):
            raise TimeoutError(f"{self._thread_name} did not start in {self._start_timeout} s")
        if errors:
            self._thread.join(30)
            self._thread = None
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _finish(loop: asyncio.AbstractEventLoop) -> None:
    """Close `loop` as asyncio.run does: cancel what is left (a client connection's handler, a
    request waiting on a stopped peer) and wait for it, so no task is destroyed while pending."""
    left = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in left:
        t.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()
