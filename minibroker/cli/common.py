"""What every `minibroker` subcommand shares: one-line errors, defaults in --help, and the
argument types that check a value where it is typed (ports, --bootstrap-server lists).

A subcommand module registers itself with `add_..._parser(sub)` (see cli.py) and reports a user
error with `fail("...")`: `minibroker` prints it as one line on stderr and exits 1.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import socket
from typing import NoReturn


class CommandError(Exception):
    """A user-facing error: printed as one line, no traceback."""


def fail(message: str) -> NoReturn:
    raise CommandError(message)


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and "(default: ...)" after every flag's help line."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (its default prints the whole usage first). Subparsers
    inherit the class, so every subcommand gets it."""

    def __init__(self, *args, **kw) -> None:
        kw.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kw)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: not a number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {value}: ports are 0-65535")
    return value


def split_servers(text: str) -> list[tuple[str, int]]:
    """"h1:p1,h2:p2" -> [(h1, p1), (h2, p2)]; ValueError naming the bad entry."""
    out = []
    for entry in text.split(","):
        host, sep, p = entry.strip().rpartition(":")
        host = host.strip("[]")                        # [::1]:9092
        if not sep or not host or not p.isdigit() or not 0 < int(p) <= 65535:
            raise ValueError(f"invalid server {entry.strip()!r} in {text!r}: expected HOST:PORT "
                             "(e.g. 127.0.0.1:9092), several separated by commas")
        out.append((host, int(p)))
    return out


def bootstrap_servers(text: str) -> str:
    """argparse type of --bootstrap-server: checked here, passed on as the text."""
    try:
        split_servers(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text.strip()


def bootstrap_parser(sub, name: str, doc: str, help: str) -> argparse.ArgumentParser:
    """The subcommand `name` with kafka-*.sh's --bootstrap-server flag."""
    p = sub.add_parser(name, description=doc, help=help)
    p.add_argument("--bootstrap-server", required=True, type=bootstrap_servers,
                   metavar="HOST:PORT[,HOST:PORT...]", help="brokers to talk to")
    return p


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text or type(e).__name__


def os_reason(e: OSError) -> str:
    """"connection refused", "address already in use", "name or service not known"."""
    if isinstance(e, socket.gaierror) or not e.errno or e.errno < 0:
        return (e.strerror or one_line(e)).lower()
    return os.strerror(e.errno).lower()


async def connect_any(servers: str, client_id: str, timeout: float = 10.0):
    """A connection to the first of `servers` that accepts one, each tried in turn."""
    from minibroker.network.client import KafkaClientConnection
    tried = []
    for host, p in split_servers(servers):
        try:
            return await asyncio.wait_for(
                KafkaClientConnection.connect(host, p, client_id=client_id), timeout)
        except OSError as e:
            tried.append(f"{host}:{p} ({os_reason(e)})")
        except asyncio.TimeoutError:
            tried.append(f"{host}:{p} (no answer in {timeout:g} s)")
    fail(f"cannot connect to any bootstrap server: {', '.join(tried)}")
