"""The modules and packages held to `mypy --strict`: a list that only grows, one entry a line. The
whole broker package is here (RequestContext and the service Protocols, dispatch, the handlers,
the replica manager), with the metadata cache and the small leaves it stands on; the rest of
controller/, log/, network/ and protocol/ joins module by module, or package by package."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

STRICT = [
    "minibroker/broker",
    "minibroker/metadata/cache.py",
    "minibroker/protocol/varint.py",
    "minibroker/log/adoption.py",
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
