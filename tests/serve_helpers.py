"""`python -m minibroker serve` as a user runs it, for the CLI tests: one place that starts the
process, reads its BOOTSTRAP line, and checks that SIGTERM stops it cleanly (exit code 0)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from typing import Iterator


@contextlib.contextmanager
def serve(*args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """A 3-broker `serve` on ephemeral ports with `args` added; (bootstrap, process)."""
    p = subprocess.Popen([sys.executable, "-m", "minibroker", "serve", "--brokers", "3",
                          "--port", "0", *args],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        line = p.stdout.readline()
        assert line.startswith("BOOTSTRAP "), line + p.stderr.read()
        yield line.split()[1], p
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        assert p.wait(15) == 0


def cli(bootstrap: str, tool: str, *args: str) -> subprocess.CompletedProcess:
    """`python -m minibroker TOOL --bootstrap-server BOOTSTRAP ARGS...`, output captured."""
    return subprocess.run([sys.executable, "-m", "minibroker", tool, "--bootstrap-server",
                           bootstrap, *args], capture_output=True, text=True, timeout=60)
