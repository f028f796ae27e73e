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


def cli(bootstrap: str, tool: str, *args: str, input_text: str | None = None
        ) -> subprocess.CompletedProcess:
    """`python -m minibroker TOOL --bootstrap-server BOOTSTRAP ARGS...`, output captured."""
    return subprocess.run([sys.executable, "-m", "minibroker", tool, "--bootstrap-server",
                           bootstrap, *args], capture_output=True, text=True, timeout=60,
                          input=input_text)


def run_main(capsys, *argv: str) -> tuple[int, str, str]:
    """`minibroker ARGV...` in this process: (exit code, stdout, stderr). A SystemExit carrying a
    message (the one-line error) counts as exit code 1 with the message on stderr, as the shell
    sees it."""
    from minibroker.cli import main
    code = 0
    try:
        main(list(argv))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
    out, err = capsys.readouterr()
    return code, out, err
