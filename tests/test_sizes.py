"""Rooms small enough to read: no module in minibroker/ above 600 lines, no function above 80,
but for the few listed here, each with its reason (at most five)."""
from __future__ import annotations

import ast
import pathlib

import minibroker

PACKAGE = pathlib.Path(minibroker.__file__).parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80

# (module path under minibroker/, function name or None for the module): why it stays for now.
EXCEPTIONS = {
    ("client/producer.py", None):
        "the producer's batching, linear hashing and pipelining; under active work (spark/client "
        "branch), to be split with it",
    ("client/producer.py", "_drain"):
        "the sender loop's one pass; under active work with the producer",
    ("log/partition_log.py", None):
        "the log and its memory-cap spill, under active work (robust branch); splits into "
        "append, read and retention parts after it lands",
    ("spark/_kafka.py", "_fetch"):
        "the Spark source's fetch loop; under active work (spark branch)",
}


def _oversized() -> set[tuple[str, str | None]]:
    found: set[tuple[str, str | None]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        source = path.read_text()
        if source.count("\n") > MAX_MODULE_LINES:
            found.add((rel, None))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES:
                found.add((rel, node.name))
    return found


def test_no_module_or_function_is_oversized_but_the_listed_few():
    assert _oversized() - set(EXCEPTIONS) == set()


def test_the_exceptions_are_few_and_still_needed():
    assert len(EXCEPTIONS) <= 5
    assert set(EXCEPTIONS) - _oversized() == set(), "fixed: take it off the list"
