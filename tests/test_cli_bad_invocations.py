"""Fifty bad invocations of the tools, each answered by one line on stderr naming the problem,
a non-zero exit and no Python exception text; and every tool, pointed at a port that accepts
connections and never answers, gives up within --timeout-ms + 1 s with one line."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from minibroker.cli import main, parser
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(300)]

# Python's exception text that must never reach a user.
LEAKS = ("Traceback", "Error(", "Exception(", "TimeoutError: TimeoutError", "node -1",
         "JSONDecodeError", "FileNotFoundError", "Errno", "KafkaConnectionError")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """{B}: a cluster with topic t1 (3 partitions); {S}: a port that accepts and never answers;
    {R}: a refused port; files for --command-config and JSON arguments."""
    d = tmp_path_factory.mktemp("bad")
    files = {"notjson": "not json", "wrongjson": '{"version": 1}', "sasl":
             "security.protocol=SASL_SSL\n", "badtimeout": "request.timeout.ms=abc\n",
             "ok": "# comment\nclient.id=scripted\nrequest.timeout.ms = 5000\n"}
    for name, text in files.items():
        (d / name).write_text(text)
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1024)         # every test's connection waits in the backlog, never accepted
    with ThreadedCluster(brokers=1) as c:
        c.create_topic("t1", 3, 1)
        yield {"B": c.bootstrap, "S": f"127.0.0.1:{silent.getsockname()[1]}",
               "R": "127.0.0.1:1", **{k: str(d / k) for k in files}}
    silent.close()


T = ["--bootstrap-server", "{B}"]
BAD = [  # (argv, what the one line must say)
    (["topics"], "the following arguments are required: --bootstrap-server"),
    (["topics", *T], "one of the arguments --create --alter --delete --list --describe"),
    (["topics", *T, "--list", "--bogus"],
     "unrecognized arguments: --bogus (see minibroker topics --help)"),
    (["topics", *T, "--create"], "--create, --alter and --delete need --topic"),
    (["topics", *T, "--create", "--topic", "x", "--partitions", "0"],
     "The partitions must be greater than 0"),
    (["topics", *T, "--create", "--topic", "x", "--replication-factor", "0"],
     "The replication factor must be between 1 and 32767 inclusive"),
    (["topics", *T, "--create", "--topic", "x", "--replication-factor", "3"],
     "Replication factor: 3 larger than available brokers: 1."),
    (["topics", *T, "--alter", "--topic", "t1"], "--alter needs --partitions"),
    (["topics", *T, "--alter", "--topic", "t1", "--partitions", "1"],
     "add --delete-partitions to do that"),
    (["topics", *T, "--alter", "--topic", "t1", "--partitions", "4", "--config", "a=b"],
     "--config works only with --create"),
    (["topics", *T, "--delete", "--topic", "nope"], "Topic 'nope' does not exist as expected"),
    (["topics", *T, "--create", "--topic", "x", "--config", "retention.ms"],
     "--config expects NAME=VALUE, got 'retention.ms'"),
    (["topics", *T, "--create", "--topic", "x", "--config", "retention.ms=abc"],
     "Invalid value abc for configuration retention.ms"),
    (["topics", *T, "--describe", "--topic", "["], "--topic '[' is not a regular expression"),
    (["topics", *T, "--create", "--topic", "x", "--replica-assignment", "1:a"],
     "partition 0 '1:a' is not broker ids"),
    (["topics", *T, "--alter", "--topic", "t1", "--delete-config", "retention.ms"],
     "argument --delete-config: no longer supported since Kafka 4.0"),
    (["topics", *T, "--list", "--timeout-ms", "0"], "invalid milliseconds 0: must be above 0"),
    (["topics", *T, "--list", "--command-config", "/no/such.properties"],
     "cannot read --command-config /no/such.properties: no such file or directory"),
    (["topics", *T, "--list", "--command-config", "{sasl}"],
     "{sasl}: sasl.mechanism=GSSAPI is not supported: set one of PLAIN, SCRAM-SHA-256, "
     "SCRAM-SHA-512, OAUTHBEARER"),
    (["topics", *T, "--list", "--command-config", "{badtimeout}"],
     "request.timeout.ms in {badtimeout}: invalid milliseconds 'abc'"),
    (["topics", "--bootstrap-server", "{R}", "--list"],
     "cannot connect to any bootstrap server: 127.0.0.1:1 (connection refused)"),
    (["topics", "--bootstrap-server", "{S}", "--list", "--timeout-ms", "300"],
     "{S} (accepted the connection but did not answer ApiVersions in 300 ms)"),
    (["topics", "--bootstrap-server", "{S}", "--list", "--command-config", "{badtimeout}",
      "--timeout-ms", "300"], "did not answer ApiVersions in 300 ms"),
    (["topics", "--bootstrap-server", "nohost", "--list"], "invalid server 'nohost'"),
    (["consumer-groups", *T], "one of the arguments --list --describe"),
    (["consumer-groups", *T, "--describe"], "--group or --all-groups is required"),
    (["consumer-groups", *T, "--describe", "--group", "nope"],
     "Consumer group 'nope' does not exist."),
    (["consumer-groups", *T, "--reset-offsets", "--group", "g", "--topic", "t1"],
     "needs one of --to-earliest"),
    (["consumer-groups", *T, "--list", "--frob"],
     "unrecognized arguments: --frob (see minibroker consumer-groups --help)"),
    (["consumer-groups", *T, "--reset-offsets", "--group", "g", "--to-offset", "x"],
     "argument --to-offset: invalid int value: 'x'"),
    (["consumer-groups", "--bootstrap-server", "{S}", "--list", "--timeout-ms", "300"],
     "did not answer ApiVersions in 300 ms"),
    (["configs", *T, "--describe", "--entity-type", "bogus"], "invalid choice: 'bogus'"),
    (["configs", *T, "--alter", "--entity-type", "topics"], "--alter needs --entity-name"),
    (["configs", *T, "--alter", "--entity-type", "topics", "--entity-name", "t1"],
     "--alter needs --add-config, --add-config-file or --delete-config"),
    (["configs", *T, "--alter", "--entity-type", "topics", "--entity-name", "t1",
      "--add-config", "retention.ms"], "'retention.ms' is not key=value"),
    (["configs", *T, "--alter", "--entity-type", "topics", "--entity-name", "t1",
      "--add-config", "retention.ms=abc"], "Invalid value abc for configuration retention.ms"),
    (["configs", *T, "--describe", "--entity-type", "topics", "--entity-name", "nope"],
     "nope"),
    (["configs", "--bootstrap-server", "{R}", "--describe", "--entity-type", "topics"],
     "connection refused"),
    (["reassign-partitions", *T, "--execute"], "--reassignment-json-file is required"),
    (["reassign-partitions", *T, "--execute", "--reassignment-json-file", "/no/such.json"],
     "cannot read /no/such.json: no such file or directory"),
    (["reassign-partitions", *T, "--execute", "--reassignment-json-file", "{notjson}"],
     "{notjson} is not JSON: Expecting value at line 1 column 1"),
    (["reassign-partitions", *T, "--execute", "--reassignment-json-file", "{wrongjson}"],
     "no 'partitions' field"),
    (["transactions", *T], "the following arguments are required: COMMAND"),
    (["transactions", *T, "describe"], "the following arguments are required: --transactional-id"),
    (["transactions", *T, "describe-producers", "--topic", "t1", "--partition", "x"],
     "argument --partition: invalid int value: 'x'"),
    (["faults", *T, "error", "--api", "Prod", "--errors", "DISCONNECT"], "unknown API 'Prod'"),
    (["faults", "--bootstrap-server", "{S}", "--timeout-ms", "300", "heal"],
     "did not answer ApiVersions in 300 ms"),
    (["serve", "--port", "70000"], "invalid port 70000"),
    (["serve", "--frob"], "unrecognized arguments: --frob (see minibroker serve --help)"),
    (["bogus-command"], "invalid choice: 'bogus-command'"),
    (["topics", "--zookeeper", "127.0.0.1:2181", "--list"],
     "argument --zookeeper: minibroker, like Kafka 4, has no ZooKeeper"),
    (["get-offsets", *T, "--time", "soon"], "Malformed time argument soon"),
    (["get-offsets", *T, "--topic-partitions", "t1:x"], "Invalid partition range 'x'"),
    (["delete-records", *T, "--offset-json-file", "{notjson}"], "is not JSON"),
    (["leader-election", *T, "--election-type", "dirty", "--all-topic-partitions"],
     "argument --election-type: invalid choice: 'dirty'"),
    (["leader-election", *T, "--election-type", "preferred", "--topic", "t1"],
     "--topic and --partition go together"),
]


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    code = 0
    try:
        main(argv)
    except SystemExit as e:
        code = e.code
        if isinstance(code, str):       # sys.exit("message"): Python prints it on stderr
            print(code, file=sys.stderr)
            code = 1
    out, err = capsys.readouterr()
    return code, out, err


def fill(text: str, env: dict) -> str:
    for k, v in env.items():
        text = text.replace("{" + k + "}", v)
    return text


def test_the_table_has_fifty_rows():
    assert len(BAD) >= 50, len(BAD)


@pytest.mark.parametrize("argv,says", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_invocation_gives_one_line(argv, says, env, capsys):
    code, out, err = run_main([fill(a, env) for a in argv], capsys)
    lines = err.splitlines()
    assert code != 0 and len(lines) == 1, (code, out, err)
    assert fill(says, env) in lines[0]
    assert not any(leak in err + out for leak in LEAKS), err


TOOLS = {  # every subcommand that talks to a cluster, with a minimal valid invocation
    "topics": ["--list"], "consumer-groups": ["--list"],
    "configs": ["--describe", "--entity-type", "topics"], "transactions": ["list"],
    "reassign-partitions": ["--progress"], "faults": ["heal"], "get-offsets": [],
    "delete-records": ["--offset-json-file", "/dev/null"],
    "leader-election": ["--election-type", "preferred", "--all-topic-partitions"],
    "console-producer": ["--topic", "t"], "console-consumer": ["--topic", "t"],
    "log-dirs": ["--describe"], "acls": ["--list"],
    "metadata-quorum": ["describe", "--status"], "features": ["describe"],
}


def test_every_cluster_tool_is_in_the_silent_port_table():
    tools = {name for name, p in subparsers().items()
             if any("--bootstrap-server" in a.option_strings for a in p._actions)}
    # `console` serves a web page until stopped: not a one-shot tool.
    assert tools - {"console"} == set(TOOLS)


def subparsers() -> dict:
    import argparse
    ap = parser()
    return next(a.choices for a in ap._actions if isinstance(a, argparse._SubParsersAction))


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_silent_port_costs_timeout_plus_one_second(tool, env, capsys):
    start = time.monotonic()
    code, out, err = run_main([tool, "--bootstrap-server", env["S"], "--timeout-ms", "1000",
                               *TOOLS[tool]], capsys)
    took = time.monotonic() - start
    assert code != 0 and len(err.splitlines()) == 1 and not out, err
    assert f"{env['S']} (accepted the connection but did not answer ApiVersions in 1000 ms)" \
        in err
    assert took < 2.0, took


def test_silent_port_from_a_shell(env):
    """The same as a user sees it: a fresh process, one line, no traceback."""
    r = subprocess.run([sys.executable, "-m", "minibroker", "consumer-groups",
                        "--bootstrap-server", env["S"], "--timeout-ms", "2000", "--list"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.splitlines() == [
        f"minibroker consumer-groups: error: no bootstrap server answered: {env['S']} "
        "(accepted the connection but did not answer ApiVersions in 2000 ms)"]
