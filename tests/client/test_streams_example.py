"""The README's streams example runs as documented: `python -m minibroker.client.streams.example`."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(120)]

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def test_the_example_scales_out_and_says_so():
    out = subprocess.run([sys.executable, "-m", "minibroker.client.streams.example"],
                         capture_output=True, text=True, timeout=110, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines.count("on_partition_expansion(4, 8): safe to send new keys now") == 1
    assert "{'clicks-app-by-user-repartition': 8, 'clicks-app-click-counts-changelog': 8}" in lines
    for when, width in (("before", 4), ("after", 8)):
        assert sum(f"{when}: current-subtopology-parallelism" in ln and ln.endswith(f"= {width}")
                   for ln in lines) == 2, out.stdout
