"""The modules and packages held to `mypy --strict`: a list that only grows, one entry a line.
The five packages of issue 40 are here whole (broker/ with RequestContext, the service Protocols,
dispatch, the handlers and the replica manager; controller/, log/, network/, protocol/), with the
metadata cache; the rest of the package joins module by module, or package by package."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

STRICT = [
    "minibroker/broker",
    "minibroker/metadata/cache.py",
    "minibroker/controller",
    "minibroker/log",
    "minibroker/network",
    "minibroker/protocol",
]


@pytest.mark.slow
def test_the_listed_modules_pass_mypy_strict():
    pytest.importorskip("mypy")
    # kafka-python ships no type information: its classes are Any to mypy (ignore-missing-imports);
    # follow-imports=silent checks the listed modules against the rest without judging the rest.
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--ignore-missing-imports",
         "--follow-imports=silent", "--no-incremental", *STRICT],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
