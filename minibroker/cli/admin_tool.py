"""What the Admin-client subcommands share: kafka-*.sh's --bootstrap-server, --command-config
and --timeout-ms flags, and one Admin for the run, opened after a first connection that must
answer ApiVersions within the timeout, so that a dead or silent broker gives one clear error.

A tool registers with `add_admin_tool_parser(sub, name, ...)` and gets `run(admin, args)` called;
`args.client` holds the client settings (minibroker.cli.common.client_settings).
"""
from __future__ import annotations

import argparse
import asyncio
from typing import Awaitable, Callable

from minibroker.cli.common import add_client_flags, bootstrap_parser, client_settings, probe
from minibroker.client.admin import Admin

Run = Callable[[Admin, argparse.Namespace], Awaitable[None]]


def add_admin_tool_parser(sub, name: str, doc: str, help: str, run: Run,
                          check: Callable[[argparse.Namespace], None] | None = None,
                          client_id: str | None = None) -> argparse.ArgumentParser:
    """The subcommand `name` with --bootstrap-server; `check(args)` runs before connecting."""
    p = bootstrap_parser(sub, name, doc, help)
    add_client_flags(p)
    client_id = client_id or f"minibroker-{name}"

    def main(args: argparse.Namespace) -> None:
        args.client = client_settings(args)
        if check is not None:
            check(args)
        asyncio.run(with_admin(args, args.client.get("client.id", client_id), run))
    p.set_defaults(func=main)
    return p


def timeout_ms(args: argparse.Namespace) -> int:
    return int(args.client["timeout.ms"])


async def with_admin(args: argparse.Namespace, client_id: str, run: Run) -> None:
    ms = timeout_ms(args)
    (await probe(args.bootstrap_server, client_id, ms, args.security)).close()  # one clear error
    async with Admin(args.bootstrap_server, client_id=client_id,
                     request_timeout_ms=ms, security=args.security) as admin:
        await run(admin, args)
