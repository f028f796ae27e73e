"""docs/cli.md from the parsers: each Kafka tool's flags (minibroker.cli.kafka_flags) and what
the matching `minibroker` subcommand does with each — supported, refused (and why), or not yet.

    python -m minibroker.cli.doc > docs/cli.md        # tests/test_cli_doc.py keeps it current
"""
from __future__ import annotations

import argparse

from minibroker.cli import parser
from minibroker.cli.common import _Refused
from minibroker.cli.kafka_flags import KAFKA_TOOLS

HEAD = """# Command-line tools

`minibroker TOOL` is Kafka's `kafka-TOOL.sh` (`minibroker kafka-home DIR` writes those scripts):
the same flags and output, against any minibroker cluster. Each tool also takes `--timeout-ms`
(the wait for connecting and for each answer) and `--command-config FILE` (Kafka client
properties: `request.timeout.ms`, `default.api.timeout.ms`, `client.id`). Errors are one line.

Scripts written for Kafka's `bin/` (librdkafka's test suite finds them through `KAFKA_PATH`):

    minibroker kafka-home /tmp/kafka          # /tmp/kafka/bin/kafka-topics.sh, ...
    KAFKA_PATH=/tmp/kafka BROKERS=127.0.0.1:9092 ...

This table is generated from the parsers (`python -m minibroker.cli.doc > docs/cli.md`; a test
fails when it is stale). *supported*: the flag works as in Kafka; *refused*: it cannot apply to
minibroker, and giving it prints the reason; *not yet*: not implemented.
"""


def _flags(p: argparse.ArgumentParser, into: dict[str, argparse.Action | str]) -> None:
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                into.setdefault(name, sub._defaults.get("refused") or "subcommand")
                _flags(sub, into)
        for opt in a.option_strings:
            if opt.startswith("--") and opt not in ("--help", "--version"):
                into.setdefault(opt, a)


def table() -> str:
    ap = parser()
    subs = next(a.choices for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    out = [HEAD]
    for tool, kafka in KAFKA_TOOLS.items():
        out.append(f"\n## {tool}  (kafka-{tool}.sh)\n\n| flag | minibroker |\n| --- | --- |")
        ours: dict = {}
        if tool in subs:
            _flags(subs[tool], ours)
        for flag in kafka:
            action = ours.get(flag)
            if action is None:
                state = "not yet" if tool in subs else "not yet (no such subcommand)"
            elif isinstance(action, _Refused):
                state = f"refused: {action.help}"
            elif isinstance(action, str) and action != "subcommand":
                state = f"refused: {action}"
            else:
                state = "supported"
            out.append(f"| `{flag}` | {state} |")
        for flag in sorted(set(ours) - set(kafka)):
            refused = isinstance(ours[flag], _Refused) or \
                isinstance(ours[flag], str) and ours[flag] != "subcommand"
            if not refused:
                out.append(f"| `{flag}` | minibroker only |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(table(), end="")
