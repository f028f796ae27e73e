"""Running the console: uvicorn on an event loop of the caller's (`serve --console-port`), or on
its own loop in a thread (`ThreadedConsole`, for tests and benchmarks).

Client properties (`--command-config FILE`, read by the CLI) are checked here: the ones the
reference client supports are passed to it, any other stops the console with one line naming it.
"""
from __future__ import annotations

import asyncio
import socket

import uvicorn

from minibroker.console.app import create_app
from minibroker.console.kafka_view import KafkaView
from minibroker.loop_thread import LoopThread

# Properties the reference client supports (security.protocol only as PLAINTEXT).
SUPPORTED = ("client.id", "request.timeout.ms", "security.protocol")


def client_options(properties: dict[str, str]) -> dict:
    """KafkaView keyword arguments from client properties; ValueError naming the first one the
    reference client does not support."""
    opts: dict = {}
    for k in sorted(properties):
        v = properties[k]
        if k == "client.id":
            opts["client_id"] = v
        elif k == "request.timeout.ms":
            if not v.isdigit() or int(v) <= 0:
                raise ValueError(f"request.timeout.ms={v!r}: expected a positive whole number")
            opts["request_timeout_ms"] = int(v)
        elif k == "security.protocol" and v.upper() == "PLAINTEXT":
            pass
        else:
            raise ValueError(f"client property {k}={v} is not supported by the console's client "
                             f"(it supports {', '.join(SUPPORTED)}=PLAINTEXT)")
    return opts


class ConsoleServer:
    """The console app served by uvicorn on the running loop."""

    def __init__(self, bootstrap: str, host: str = "127.0.0.1", port: int = 8080,
                 properties: dict[str, str] | None = None) -> None:
        self.view = KafkaView(bootstrap, **client_options(properties or {}))
        self.app = create_app(self.view)
        self.host = host
        self._sock: socket.socket | None = None
        self._port = port
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task | None = None

    @property
    def port(self) -> int:
        return self._sock.getsockname()[1] if self._sock is not None else self._port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> "ConsoleServer":
        """Bind (OSError if the port is taken) and serve in a task until stop()."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self._port))
        except OSError:
            sock.close()
            raise
        sock.listen(128)
        sock.setblocking(False)
        self._sock = sock
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", access_log=False)
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # the caller owns the signals
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[sock]))
        for _ in range(500):
            if self._server.started or self._task.done():
                break
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()
        return self

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            try:
                await asyncio.wait_for(self._task, 10)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._task.cancel()
        if self._sock is not None:
            self._sock.close()

    async def serve_forever(self) -> None:
        await self.start()
        assert self._task is not None
        await self._task


class ThreadedConsole(LoopThread):
    """A ConsoleServer on its own event loop in a thread: `with ThreadedConsole(bs) as c: c.url`."""

    def __init__(self, bootstrap: str, host: str = "127.0.0.1", port: int = 0,
                 properties: dict[str, str] | None = None) -> None:
        super().__init__("minibroker-console", 60.0)
        self._args = (bootstrap, host, port, properties)
        self.server: ConsoleServer | None = None

    async def _start(self) -> None:
        self.server = await ConsoleServer(*self._args).start()

    async def _stop(self) -> None:
        await self.server.stop()

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url
