"""What the Admin-client subcommands (configs, consumer-groups, reassign-partitions,
transactions) share: kafka-*.sh's --bootstrap-server flag, and one Admin for the run, opened after
a first plain connection so that unreachable brokers give one clear error.

A tool registers with `add_admin_tool_parser(sub, name, ...)` and gets `run(admin, args)` called.
"""
from __future__ import annotations

import argparse
import asyncio
from typing import Awaitable, Callable

from minibroker.cli.common import bootstrap_parser, connect_any
from minibroker.client.admin import Admin

Run = Callable[[Admin, argparse.Namespace], Awaitable[None]]


def add_admin_tool_parser(sub, name: str, doc: str, help: str, run: Run,
                          check: Callable[[argparse.Namespace], None] | None = None,
                          client_id: str | None = None) -> argparse.ArgumentParser:
    """The subcommand `name` with --bootstrap-server; `check(args)` runs before connecting."""
    p = bootstrap_parser(sub, name, doc, help)
    client_id = client_id or f"minibroker-{name}"

    def main(args: argparse.Namespace) -> None:
        if check is not None:
            check(args)
        asyncio.run(_with_admin(args, client_id, run))
    p.set_defaults(func=main)
    return p


async def _with_admin(args: argparse.Namespace, client_id: str, run: Run) -> None:
    (await connect_any(args.bootstrap_server, client_id)).close()  # one clear error
    async with Admin(args.bootstrap_server, client_id=client_id) as admin:
        await run(admin, args)
