"""`minibroker COMMAND ...` — a broker cluster and Kafka-tool-like commands (`--help` on each).

    minibroker serve                      # 3 brokers on 127.0.0.1:9092-9094
    minibroker serve --brokers 1 --port 0 --override num.partitions=3
    minibroker topics --bootstrap-server 127.0.0.1:9092 --list
"""
from __future__ import annotations

import logging
import sys

from minibroker.cli.common import CommandError, Parser, one_line


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
    from minibroker.cli.console import add_console_parser
    add_console_parser(sub)
    return ap


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
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
    except Exception as e:  # noqa: BLE001 — one line for the user; the traceback at DEBUG
        logging.getLogger("minibroker.cli").debug("%s failed", args.command, exc_info=True)
        sys.exit(f"minibroker {args.command}: error: {type(e).__name__}: {one_line(e)}")


if __name__ == "__main__":
    main()
