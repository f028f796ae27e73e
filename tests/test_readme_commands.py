"""The README's two set-up commands, run as a newcomer runs them: in a fresh clone, each creating
its virtual environment and installing everything from the registries (PyPI, npm, Debian).

Slow (minutes, network): runs in CI (`CI` set) or with MINIBROKER_SLOW=1. The run command gets
`--port 0` appended (a fixed 9092 may be taken on a shared machine). The test command runs as
written, with PYTEST_ADDOPTS choosing a small subset (one produce/consume test per client and a
unit test file), so CI does not run the whole suite twice; the installs are the real ones.
"""
from __future__ import annotations

import os
import pathlib
import re
import shutil
import signal
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SLOW = bool(os.environ.get("CI") or os.environ.get("MINIBROKER_SLOW"))

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(1500)]
slow = [pytest.mark.slow,
        pytest.mark.skipif(not SLOW, reason="slow (fresh venvs, network): CI or MINIBROKER_SLOW=1")]


def _slow(fn):
    for mark in slow:
        fn = mark(fn)
    return fn

SUBSET = ("tests/test_partitioning.py "
          "conformance/test_clients.py::test_produce_consume_offsets -k 'partition or none'")


def readme_commands() -> tuple[str, str]:
    """(run command, test command): the README's indented lines creating .venv."""
    lines = [ln.strip() for ln in (ROOT / "README.md").read_text().splitlines()
             if ln.startswith("    python3 -m venv ")]
    run = [ln for ln in lines if "minibroker serve" in ln]
    test = [ln for ln in lines if "pytest" in ln]
    assert len(run) == 1 and len(test) == 1, lines
    return run[0], test[0]


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert readme_commands()[1] in ci


def test_ci_tests_the_lowest_kafka_python_pyproject_allows():
    pyproject = (ROOT / "pyproject.toml").read_text()
    lowest = re.search(r'"kafka-python>=([0-9.]+),<([0-9.]+)"', pyproject)
    assert lowest, "kafka-python must be a range"
    assert 'kafka-python==$LOWEST' in (ROOT / ".ci" / "run").read_text()


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> pathlib.Path:
    """The committed tree, as `git clone` gives it (a copy without build products otherwise)."""
    dest = tmp_path_factory.mktemp("newcomer") / "minibroker"
    if (ROOT / ".git").exists():
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(dest)], check=True, timeout=120)
    else:
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
            ".venv*", "node_modules", "__pycache__", "*.egg-info", ".pytest_cache"))
    return dest


def newcomer_env() -> dict[str, str]:
    """A shell as a newcomer has it: none of this checkout's paths or virtual environment."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MINIBROKER_CLIENTS", "PYTEST_ADDOPTS")
           and not k.startswith("PYTEST_")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@_slow
def test_run_command_prints_bootstrap(clone):
    run, _ = readme_commands()
    proc = subprocess.Popen(run + " --port 0", shell=True, cwd=clone, env=newcomer_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    seen = []
    try:
        deadline = time.monotonic() + 900
        for line in proc.stdout:                # pip's output first, then the broker's
            seen.append(line)
            if line.startswith("BOOTSTRAP ") or time.monotonic() > deadline:
                break
        assert seen and seen[-1].startswith("BOOTSTRAP "), "".join(seen[-40:])
        servers = seen[-1].split()[1].split(",")
        assert len(servers) == 3 and all(re.fullmatch(r"127\.0\.0\.1:\d+", s) for s in servers)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    assert (clone / ".venv" / "bin" / "minibroker").exists()


@_slow
def test_test_command_installs_everything_and_passes(clone):
    _, test = readme_commands()
    env = newcomer_env()
    env["PYTEST_ADDOPTS"] = f"-p no:cacheprovider {SUBSET}"
    r = subprocess.run(test, shell=True, cwd=clone, env=env, capture_output=True, text=True,
                       timeout=1400)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-6000:]
    summary = r.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"(\d+) passed(, \d+ deselected)? in [\d.]+s( \(.*\))?", summary)
    assert m, summary                          # nothing failed, skipped or errored
    assert int(m.group(1)) >= 5 + 1, summary   # five clients' produce/consume, and unit tests
    assert "kafkajs: 2.2.4" in out and "kcat: Version" in out


@_slow
def test_wheel_ships_py_typed_schemas_and_license(clone, tmp_path):
    import zipfile
    subprocess.run([str(clone / ".venv" / "bin" / "pip"), "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(clone)], check=True, timeout=600, env=newcomer_env())
    [wheel] = tmp_path.glob("minibroker-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "minibroker/py.typed" in names
    assert any(n.startswith("minibroker/_schemas/") and n.endswith(".json") for n in names)
    assert any(n.endswith(".dist-info/LICENSE") or "/licenses/LICENSE" in n for n in names), names
