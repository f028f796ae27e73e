"""`minibroker console` — a web console for a Kafka cluster (minibroker's or any other).

    minibroker console --bootstrap-server 127.0.0.1:9092            # http://127.0.0.1:8080
    minibroker console --bootstrap-server ... --port 0 --command-config client.properties

Pages: cluster, topics, messages, consumer groups with a lag chart, partition changes (KIP-253
expansion/deletion, KIP-179 reassignment), transactions. Loopback only unless --host says
otherwise: the console can create and delete topics and reset offsets.
Needs the 'console' extra: pip install 'minibroker[console]'.
"""
from __future__ import annotations

import asyncio
import signal

from minibroker.cli.common import (bootstrap_parser, fail, one_line, os_reason, port,
                                   read_properties)


def add_console_parser(sub) -> None:
    c = bootstrap_parser(sub, "console", __doc__, "a web console for the cluster")
    c.add_argument("--host", default="127.0.0.1", help="address the console listens on")
    c.add_argument("--port", type=port, default=8080, help="its port (0 = any free port)")
    c.add_argument("--command-config", default=None, metavar="FILE",
                   help="client properties for the console's Kafka client")
    c.set_defaults(func=run_console)


def load_properties(path: str | None) -> dict[str, str]:
    """--command-config's properties, checked against what the client supports (one-line error)."""
    from minibroker.console.server import client_options
    if path is None:
        return {}
    props = read_properties(path)
    try:
        client_options(props)
    except ValueError as e:
        fail(f"{path}: {one_line(e)}")
    return props


def require_console_extra() -> None:
    try:
        import jinja2, starlette, uvicorn  # noqa: F401,E401
    except ImportError as e:
        fail(f"the console needs the 'console' extra ({e.name} is missing): "
             "pip install 'minibroker[console]'")


def run_console(args) -> None:
    require_console_extra()
    props = load_properties(args.command_config)
    asyncio.run(_serve(args.bootstrap_server, args.host, args.port, props))


async def _serve(bootstrap: str, host: str, p: int, props: dict[str, str]) -> None:
    from minibroker.console.server import ConsoleServer
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        server = await ConsoleServer(bootstrap, host, p, props).start()
    except OSError as e:
        fail(f"cannot serve the console on {host} port {p}: {os_reason(e)}")
    print(f"CONSOLE {server.url}", flush=True)
    await stop.wait()
    await server.stop()
