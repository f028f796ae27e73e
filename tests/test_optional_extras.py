"""Without the `spark` extra the Spark tests are skipped with the reason, not a collection
error (its modules are hidden from a child pytest, as in a venv without them)."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.real_time

HIDE_AND_RUN = """
import sys
for m in ("pyarrow", "pandas", "pyspark", "numpy"):
    sys.modules[m] = None           # as if the spark extra were not installed
import pytest
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", "tests/spark"]))
"""


def test_spark_tests_skip_without_the_extra():
    root = pathlib.Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "MINIBROKER_CLIENTS"}
    r = subprocess.run([sys.executable, "-c", HIDE_AND_RUN], cwd=root, env=env,
                       capture_output=True, text=True, timeout=300)
    last = r.stdout.strip().splitlines()[-1]
    assert r.returncode in (0, 5) and "skipped" in last and "error" not in last \
        and "failed" not in last, r.stdout[-3000:]
    assert "the spark extra is not installed" in r.stdout
