"""conformance/install.sh and MINIBROKER_CLIENTS as a newcomer meets them: what is missing is
named in one line, and a missing client fails its tests unless the user opted out of it."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]

ROOT = pathlib.Path(__file__).resolve().parent.parent


def bare_path(tmp_path: pathlib.Path, *tools: str) -> str:
    """A PATH holding only `tools` (no kcat, node, npm, sudo or apt-get)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(shutil.which(tool))
    return str(bin_dir)


def install(tmp_path, **env) -> subprocess.CompletedProcess:
    return subprocess.run([shutil.which("bash"), str(ROOT / "conformance" / "install.sh")], capture_output=True,
                          text=True, timeout=120,
                          env={"PATH": bare_path(tmp_path, "bash", "dirname", "id"), **env})


def test_install_names_what_is_missing_in_one_line(tmp_path):
    r = install(tmp_path)
    assert r.returncode == 1
    assert r.stderr.count("\n") == 1, r.stderr
    assert "missing kcat nodejs npm" in r.stderr and "MINIBROKER_CLIENTS=python" in r.stderr


def test_install_needs_nothing_for_the_python_clients(tmp_path):
    r = install(tmp_path, MINIBROKER_CLIENTS="python")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = install(tmp_path, MINIBROKER_CLIENTS="python,kcat")
    assert r.returncode == 1 and "missing kcat:" in r.stderr, r.stderr


def conformance(tmp_path, select: str, **env) -> subprocess.CompletedProcess:
    path = bare_path(tmp_path, "dirname")            # kcat is not on this PATH
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "conformance/test_clients.py::test_produce_consume_offsets", "-k", select],
        cwd=ROOT, capture_output=True, text=True, timeout=150,
        env={**os.environ, "PATH": path, "PYTHONPATH": str(ROOT), **env})


def test_a_missing_client_fails_by_default(tmp_path):
    r = conformance(tmp_path, "kcat-none", MINIBROKER_CLIENTS="")
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout[-2000:]
    assert "kcat is not installed" in r.stdout


def test_a_client_left_out_on_purpose_is_skipped_with_the_reason(tmp_path):
    r = conformance(tmp_path, "kcat-none or kafka_python-none", MINIBROKER_CLIENTS="python")
    assert r.returncode == 0, r.stdout[-2000:]
    assert "1 passed, 1 skipped" in r.stdout
    assert "kcat not selected (MINIBROKER_CLIENTS=python)" in r.stdout
