"""`minibroker kafka-home DIR` — a Kafka installation's bin/ for scripts written for Kafka.

    minibroker kafka-home /tmp/kafka
    /tmp/kafka/bin/kafka-topics.sh --bootstrap-server 127.0.0.1:9092 --list
    KAFKA_PATH=/tmp/kafka BROKERS=127.0.0.1:9092 make -C tests   # librdkafka's test suite

Writes DIR/bin/kafka-<tool>.sh for every `minibroker` subcommand named after a Kafka tool, each
running that subcommand with the Python (and the minibroker) that wrote it. The tools take
--bootstrap-server; the pre-KIP-500 --zookeeper is refused with one line.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shlex
import stat
import sys

from minibroker.cli.common import fail, os_reason
from minibroker.cli.kafka_flags import KAFKA_TOOLS

_PACKAGE_PARENT = pathlib.Path(__file__).resolve().parent.parent.parent


def add_kafka_home_parser(sub) -> None:
    p = sub.add_parser("kafka-home", description=__doc__,
                       help="write DIR/bin/kafka-*.sh scripts that run these subcommands")
    p.add_argument("dir", metavar="DIR", help="the directory to use as KAFKA_PATH")
    # `sub.choices`, read when the command runs, holds every subcommand by then.
    p.set_defaults(func=lambda args: _main(args, sub.choices))


def script(tool: str) -> str:
    python = shlex.quote(sys.executable)
    path = shlex.quote(str(_PACKAGE_PARENT))
    return (f"#!/bin/sh\n# kafka-{tool}.sh: `minibroker {tool}` (written by minibroker "
            f"kafka-home).\nPYTHONPATH={path}${{PYTHONPATH:+:$PYTHONPATH}} exec {python} -m "
            f"minibroker {tool} \"$@\"\n")


def tools(subcommands) -> list[str]:
    """The subcommands named after a Kafka tool (kafka-acls.sh when `acls` exists)."""
    return sorted(t for t in set(KAFKA_TOOLS) | {"acls"} if t in subcommands)


def _main(args: argparse.Namespace, subcommands) -> None:
    names = tools(subcommands)
    bin_dir = pathlib.Path(args.dir) / "bin"
    try:
        bin_dir.mkdir(parents=True, exist_ok=True)
        for tool in names:
            path = bin_dir / f"kafka-{tool}.sh"
            path.write_text(script(tool))
            path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    except OSError as e:
        fail(f"cannot write {e.filename or bin_dir}: {os_reason(e)}")
    print(f"Wrote {len(names)} scripts to {bin_dir}: "
          f"{', '.join(f'kafka-{t}.sh' for t in names)}")
    print(f"export KAFKA_PATH={shlex.quote(os.path.abspath(args.dir))}")
