"""console-producer and console-consumer as Kafka's: stdin lines in (keys parsed), records out
in DefaultMessageFormatter's layout, with and without a group."""
from __future__ import annotations

import subprocess
import sys

import pytest

from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]


def tool(*argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minibroker", *argv], input=stdin,
                          capture_output=True, text=True, timeout=90)


def test_produce_then_consume():
    with ThreadedCluster(brokers=1, group_initial_rebalance_delay_ms=0) as c:
        c.create_topic("lines", 1, 1)
        b = ("--bootstrap-server", c.bootstrap)
        r = tool("console-producer", *b, "--topic", "lines", "--property", "parse.key=true",
                 "--property", "key.separator=:", stdin="k1:hello\nk2:wor:ld\n")
        assert (r.returncode, r.stderr) == (0, "")
        r = tool("console-consumer", *b, "--topic", "lines", "--from-beginning",
                 "--max-messages", "2", "--property", "print.key=true", "--property",
                 "print.offset=true", "--property", "key.separator=|")
        assert r.stdout.splitlines() == ["Offset:0|k1|hello", "Offset:1|k2|wor:ld"]
        assert r.stderr == "Processed a total of 2 messages\n"
        r = tool("console-consumer", *b, "--topic", "lines", "--group", "readers",
                 "--from-beginning", "--timeout-ms", "3000")
        assert r.stdout.splitlines() == ["hello", "wor:ld"], r.stderr
        r = tool("console-consumer", *b, "--topic", "lines", "--partition", "0", "--offset",
                 "1", "--max-messages", "1")
        assert r.stdout == "wor:ld\n"
        r = tool("console-producer", *b, "--topic", "lines", "--property", "parse.key=true",
                 stdin="no separator here\n")
        assert r.returncode == 1 and r.stderr.splitlines() == [
            "minibroker console-producer: error: No key separator found on line number 1: "
            "'no separator here'"]
        r = tool("console-consumer", *b, "--topic", "lines", "--formatter", "x.Y")
        assert r.returncode == 2 and "names a Java class" in r.stderr
