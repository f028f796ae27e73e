"""Every bad invocation a user reported prints one line naming the problem, exits non-zero, and
shows no traceback; and a failed start leaves no listener behind."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from minibroker.cluster import Cluster

pytestmark = pytest.mark.real_time


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minibroker", *args], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


def free_then_taken() -> tuple[int, socket.socket]:
    """(P, a socket listening on P+1) with P free: a 2-broker cluster on port P fails on P+1."""
    for _ in range(50):
        first = socket.socket()
        first.bind(("127.0.0.1", 0))
        taken = socket.socket()
        try:
            taken.bind(("127.0.0.1", first.getsockname()[1] + 1))
        except OSError:
            first.close()
            taken.close()
            continue
        taken.listen()
        port = first.getsockname()[1]
        first.close()
        return port, taken
    raise RuntimeError("no two consecutive free ports")


BAD = [  # (argv, what the one line must say)
    (["serve", "--brokers", "2", "--port", "{P}"], "address already in use"),
    (["serve", "--port", "70000"], "invalid port 70000"),
    (["serve", "--port", "65535"], "no room for 3 brokers"),
    (["serve", "--host", "999.1.1.1"], "invalid host '999.1.1.1'"),
    (["serve", "--log-level", "bogus"], "--log-level: invalid choice: 'BOGUS'"),
    (["serve", "--override", "num.partitions=abc"],
     "Invalid value abc for configuration num.partitions: Not a number"),
    (["serve", "--override", "bogus"], "--override expects NAME=VALUE, got 'bogus'"),
    (["serve", "--override", "no.such.config=1"], "Unknown broker config no.such.config"),
    (["serve", "--override", "num.partitions=-5"],
     "Invalid value -5 for configuration num.partitions: Value must be at least 1"),
    (["serve", "--override", "auto.create.topics.enable=yes"], "either true or false"),
    (["serve", "--override", "log.retention.ms=abc", "--port", "0"],
     "Invalid value abc for configuration log.retention.ms"),
    (["serve", "--brokers", "0"], "--brokers must be at least 1, got 0"),
    (["serve", "--brokers", "-1"], "--brokers must be at least 1, got -1"),
    (["serve", "--brokers", "2", "--rack", "a", "--rack", "b", "--rack", "c"],
     "3 --rack values for 2 brokers"),
    (["serve", "--controller-quorum-voters", "1,x"],
     "--controller-quorum-voters expects broker ids like 1,2,3, got '1,x'"),
    (["serve", "--brokers", "2", "--controller-quorum-voters", "2,3"],
     "Invalid value 3 for configuration controller.quorum.voters"),
    (["topics", "--bootstrap-server", "127.0.0.1:1", "--list"],
     "cannot connect to any bootstrap server: 127.0.0.1:1 (connection refused)"),
    (["topics", "--bootstrap-server", "127.0.0.1:1,127.0.0.1:2", "--list"],
     "127.0.0.1:1 (connection refused), 127.0.0.1:2 (connection refused)"),
    (["topics", "--bootstrap-server", "127.0.0.1", "--list"], "invalid server '127.0.0.1'"),
    (["topics", "--bootstrap-server", "127.0.0.1:9092"], "one of the arguments --create"),
    (["reassign-partitions", "--bootstrap-server", "127.0.0.1:1", "--progress"],
     "cannot connect to any bootstrap server: 127.0.0.1:1"),
    (["faults", "--bootstrap-server", "127.0.0.1:1", "heal"],
     "cannot connect to any bootstrap server: 127.0.0.1:1 (connection refused)"),
    (["faults", "--bootstrap-server", "127.0.0.1:1", "error", "--api", "Prod", "--errors",
      "DISCONNECT"], "unknown API 'Prod'"),
    (["faults", "--bootstrap-server", "127.0.0.1:1", "error", "--api", "Produce", "--errors",
      "NOT_LEADER,DISCONNECT"], "unknown error 'NOT_LEADER'"),
    (["faults", "--bootstrap-server", "127.0.0.1:1", "partition", "1", "x"],
     "invalid broker ids 'x'"),
    (["faults", "--bootstrap-server", "127.0.0.1:1", "latency", "--broker", "2"],
     "the following arguments are required: --ms"),
    (["serve", "--faults", "--processes"], "--faults works in one process only"),
    (["serve", "--processes", "--strict"], "--trace and --strict observe the brokers of one "
     "process: not with --processes"),
    (["serve", "--processes", "--security-protocol", "SASL_PLAINTEXT", "--override",
      "inter.broker.listener.name=SASL_PLAINTEXT"], "--processes: inter.broker.listener.name="
     "SASL_PLAINTEXT is a SASL_PLAINTEXT listener; leave it unset"),
    (["serve", "--processes", "--override", "listeners=BROKER://127.0.0.1:0", "--override",
      "listener.security.protocol.map=BROKER:SASL_PLAINTEXT"],
     "the listener name BROKER is the brokers' own"),
    (["bogus-command"], "invalid choice: 'bogus-command'"),
    ([], "the following arguments are required: COMMAND"),
]


@pytest.mark.parametrize(("argv", "says"), BAD, ids=[" ".join(a) or "(none)" for a, _ in BAD])
def test_bad_invocation_prints_one_line(argv, says):
    port, taken = free_then_taken()
    with taken:
        r = run(*[a.replace("{P}", str(port)) for a in argv])
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.endswith("\n"), r.stderr
    assert says in r.stderr, r.stderr
    assert r.stdout == ""


@pytest.mark.timeout(180)       # one `--help` subprocess per subcommand: seconds each under load
def test_version_and_help_name_every_flag_and_command():
    from minibroker import __version__
    from minibroker.cli import parser
    r = run("--version")
    assert (r.returncode, r.stdout) == (0, f"minibroker {__version__}\n")
    sub = next(a for a in parser()._actions if a.dest == "command")
    top = run("--help").stdout
    for name, command in sub.choices.items():
        assert name in top
        text = run(name, "--help").stdout
        for action in command._actions:
            if action.option_strings and action.dest != "help":
                flag = max(action.option_strings, key=len)
                assert action.help, f"{name} {flag} has no help line"
                options = text[text.index("\noptions:"):]
                entry = options[options.index(f"\n  {flag}") + 3:]
                entry = entry[:entry.find("\n  -")] if "\n  -" in entry else entry
                assert "(default:" in entry, f"{name} {flag}: no default in --help"


async def test_failed_start_closes_the_listeners_it_opened():
    port, taken = free_then_taken()
    with taken:
        cluster = Cluster(brokers=2, port=port)
        with pytest.raises(OSError):
            await cluster.start()
    assert not any(b.running for b in cluster.brokers.values())
    with socket.socket() as s:                 # broker 1's port is free again
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
