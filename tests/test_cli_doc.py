"""docs/cli.md is what the parsers say: regenerate it with `python -m minibroker.cli.doc`."""
from __future__ import annotations

import pathlib

from minibroker.cli.doc import table
from minibroker.cli.kafka_flags import KAFKA_TOOLS

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def test_docs_cli_md_is_current():
    assert DOC.read_text() == table(), "run: python -m minibroker.cli.doc > docs/cli.md"


def test_every_kafka_flag_has_a_row():
    text = table()
    for tool, flags in KAFKA_TOOLS.items():
        section = text.split(f"## {tool}  ")[1].split("\n## ")[0]
        for flag in flags:
            assert f"| `{flag}` |" in section, (tool, flag)
