"""The modules held to `mypy --strict`: a list that only grows. The request path's spine is here
(RequestContext and the service Protocols, dispatch, the metadata cache), and the whole of
controller/, log/, network/ and protocol/; the rest of broker/ joins module by module."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

STRICT = [
    "minibroker/broker/context.py",
    "minibroker/broker/dispatch.py",
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
