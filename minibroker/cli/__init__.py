"""`minibroker COMMAND ...` — a broker cluster and Kafka-tool-like commands (`--help` on each).

    minibroker serve                      # 3 brokers on 127.0.0.1:9092-9094
    minibroker serve --brokers 1 --port 0 --override num.partitions=3
    minibroker topics --bootstrap-server 127.0.0.1:9092 --list
"""
from __future__ import annotations

import argparse
import logging
import os
import sys

from minibroker.cli.common import CommandError, Parser, user_message


def parser() -> Parser:
    from minibroker import __version__
    ap = Parser(prog="minibroker", description=__doc__)
    ap.add_argument("--version", action="version", version=f"minibroker {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from minibroker.cli.serve import add_serve_parser
    add_serve_parser(sub, __doc__)
    # Subcommands: each module adds its own parser (keep one line per command here).
    from minibroker.cli.topics import add_topics_parser
    from minibroker.cli.reassign import add_reassign_parser
    add_topics_parser(sub)
    add_reassign_parser(sub)
    from minibroker.cli.groups import add_groups_parser
    add_groups_parser(sub)
    from minibroker.cli.configs import add_configs_parser
    add_configs_parser(sub)
    from minibroker.cli.transactions import add_transactions_parser
    add_transactions_parser(sub)
    from minibroker.cli.faults import add_faults_parser
    add_faults_parser(sub)
    from minibroker.cli.acls import add_acls_parser; add_acls_parser(sub)  # noqa: E702
    from minibroker.cli.console import add_console_parser
    add_console_parser(sub)
    from minibroker.cli.offsets_tools import add_offsets_tools_parsers
    add_offsets_tools_parsers(sub)
    from minibroker.cli.leader_election import add_leader_election_parser
    add_leader_election_parser(sub)
    from minibroker.cli.console_tools import add_console_tools_parsers
    add_console_tools_parsers(sub)
    from minibroker.cli.log_dirs import add_log_dirs_parser
    add_log_dirs_parser(sub)
    from minibroker.cli.metadata_quorum import add_metadata_quorum_parser
    add_metadata_quorum_parser(sub)
    from minibroker.cli.features import add_features_parser; add_features_parser(sub)  # noqa: E702
    from minibroker.cli.kafka_home import add_kafka_home_parser
    add_kafka_home_parser(sub)
    from minibroker.cli.trace import add_trace_parser
    add_trace_parser(sub)
    return ap


def _parse(argv: list[str] | None):
    """parse_args, except that an unknown flag of a subcommand is reported by that subcommand
    (its usage, not `minibroker --help`'s)."""
    ap = parser()
    argv = sys.argv[1:] if argv is None else argv
    _unknown_flags(ap, argv)
    args, extra = ap.parse_known_args(argv)
    if extra:
        sub = subparser(ap, args.command)
        (sub or ap).error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _unknown_flags(ap: argparse.ArgumentParser, argv: list[str]) -> None:
    """An unknown --flag is reported by the (sub)command it was given to, before argparse's own
    checks (which would speak of a missing required flag instead)."""
    current, unknown = ap, []
    for arg in argv:
        nested = subparser(current, arg)
        if nested is not None:
            if unknown:
                break
            current = nested
        elif arg.startswith("--") and arg != "--":
            found = current._parse_optional(arg)
            if found is not None and found[0] is None:
                unknown.append(arg)
    if unknown and current is not ap:
        current.error(f"unrecognized arguments: {' '.join(unknown)}")


def subparser(ap, command: str | None):
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices.get(command)
    return None


def main(argv: list[str] | None = None) -> None:
    if (sys.argv[1:] if argv is None else argv) == ["--version"]:
        from minibroker import __version__      # the package root is light (PEP 562)
        print(f"minibroker {__version__}")      # before the parsers, which load kafka-python
        return
    args = _parse(argv)
    level = getattr(args, "log_level", "WARNING")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "serve":
            from minibroker.cli.serve import run_serve
            run_serve(args)
        else:
            args.func(args)
    except CommandError as e:
        sys.exit(f"minibroker {args.command}: error: {e}")
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:         # `... | head`: the reader left; no message, as cat does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 — one line for the user; the traceback at DEBUG
        logging.getLogger("minibroker.cli").debug("%s failed", args.command, exc_info=True)
        sys.exit(f"minibroker {args.command}: error: {user_message(e)}")


if __name__ == "__main__":
    main()
