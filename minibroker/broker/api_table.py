"""docs/apis.md's table of Kafka APIs served, generated from the dispatch registry (the same table
ApiVersions answers with), so it cannot go stale: tests/test_api_table.py compares the two.

    python -m minibroker.broker.api_table            # print the table
    python -m minibroker.broker.api_table --write    # rewrite it in docs/apis.md
"""
from __future__ import annotations

import pathlib
import sys

from kafka.protocol.api_key import ApiKey

import minibroker.broker.handlers  # noqa: F401 — registers every handler
from minibroker.broker.dispatch import HANDLERS, INTER_BROKER_KEYS

START = "<!-- api-table:start (python -m minibroker.broker.api_table --write) -->"
END = "<!-- api-table:end -->"
README = pathlib.Path(__file__).resolve().parents[2] / "docs" / "apis.md"

# Keys of our own (KIP drafts without a Kafka key), by key.
EXTENSIONS = {1000: "KIP-253 draft", 1001: "KIP-253 draft", 1002: "KIP-179 draft",
              1003: "KIP-179 draft", 1004: "minibroker: faults on demand, `serve --faults` only"}


def markdown() -> str:
    lines = [START, "", "| key | API | versions | |", "| --- | --- | --- | --- |"]
    kafka_keys = {int(k): k.name for k in ApiKey}
    for key, h in sorted(HANDLERS.items()):
        note = EXTENSIONS.get(key, "inter-broker: control-plane listener only (KIP-291)"
                              if key in INTER_BROKER_KEYS else "")
        name = kafka_keys.get(key, h.name)
        lines.append(f"| {key} | {name} | {h.versions[0]}-{h.versions[1]} | {note} |")
    missing = [k for k in sorted(ApiKey, key=int) if int(k) not in HANDLERS]
    lines += ["", f"Not served ({len(missing)} of Kafka's keys; a request for one closes the "
              "connection, as Kafka does for a key it does not know): "
              + ", ".join(f"{int(k)} {k.name}" for k in missing) + ".", "", END]
    return "\n".join(lines)


def in_readme(text: str) -> str:
    return text[text.index(START):text.index(END) + len(END)]


def main(argv: list[str]) -> None:
    table = markdown()
    if "--write" in argv:
        text = README.read_text()
        README.write_text(text.replace(in_readme(text), table))
    else:
        print(table)


if __name__ == "__main__":
    main(sys.argv[1:])
