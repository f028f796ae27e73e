"""`minibroker console` and `serve --console-port` as a user runs them: the CONSOLE line, pages
served over HTTP, unsupported client properties refused in one line, bad input on the page."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest

from minibroker.cli.common import read_properties
from minibroker.console.server import ThreadedConsole, client_options
from minibroker.testing.threaded import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(120)]


def start(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "minibroker", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def console_line(p: subprocess.Popen) -> str:
    for _ in range(5):
        line = p.stdout.readline()
        if line.startswith("CONSOLE "):
            return line.split()[1]
        assert line, p.stderr.read()
    raise AssertionError("no CONSOLE line")


def stop(p: subprocess.Popen) -> None:
    os.killpg(p.pid, signal.SIGTERM)
    assert p.wait(20) == 0, p.stderr.read()


def test_serve_with_a_console_port_serves_the_console():
    p = start("serve", "--brokers", "1", "--port", "0", "--console-port", "0")
    try:
        url = console_line(p)
        assert url.startswith("http://127.0.0.1:")
        r = httpx.get(url + "/cluster", timeout=30)
        assert r.status_code == 200 and "minibroker" in r.text and "brokers" in r.text
    finally:
        stop(p)


def test_console_command_against_a_cluster(tmp_path):
    props = tmp_path / "client.properties"
    props.write_text("# the console's client\nclient.id=console-test\nrequest.timeout.ms=5000\n"
                     "security.protocol=PLAINTEXT\n")
    with ThreadedCluster(brokers=1) as cluster:
        cluster.create_topic("cli-topic", partitions=2)
        p = start("console", "--bootstrap-server", cluster.bootstrap, "--port", "0",
                  "--command-config", str(props))
        try:
            url = console_line(p)
            r = httpx.get(url + "/topics", timeout=30)
            assert r.status_code == 200 and "cli-topic" in r.text
            # The live part alone, as console.js asks for it.
            r = httpx.get(url + "/topics", headers={"X-Console-Fragment": "1"}, timeout=30)
            assert "cli-topic" in r.text and "<html" not in r.text
            r = httpx.get(url + "/topics/no-such-topic", timeout=30)
            assert r.status_code == 404 and "no topic &#39;no-such-topic&#39;" in r.text
            r = httpx.post(url + "/topics", data={"name": "x", "partitions": "two"}, timeout=30)
            assert r.status_code == 400 and "invalid partition count &#39;two&#39;" in r.text
            assert "Traceback" not in r.text
        finally:
            stop(p)


def test_unsupported_client_properties_are_refused_in_one_line(tmp_path):
    props = tmp_path / "sasl.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
    r = subprocess.run([sys.executable, "-m", "minibroker", "console", "--bootstrap-server",
                        "127.0.0.1:9", "--command-config", str(props)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    assert "client property sasl.mechanism=PLAIN is not supported" in r.stderr
    r = subprocess.run([sys.executable, "-m", "minibroker", "console", "--bootstrap-server",
                        "127.0.0.1:9", "--command-config", str(tmp_path / "absent")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "cannot read --command-config" in r.stderr, r.stderr


def test_client_options_from_properties(tmp_path):
    f = tmp_path / "p.properties"
    f.write_text("! comment\nclient.id = a b\nrequest.timeout.ms:1500\n")
    assert client_options(read_properties(str(f))) == {"client_id": "a b",
                                                        "request_timeout_ms": 1500}
    with pytest.raises(ValueError, match="request.timeout.ms='-1'"):
        client_options({"request.timeout.ms": "-1"})
    with pytest.raises(ValueError, match="ssl.truststore.location=x is not supported"):
        client_options({"ssl.truststore.location": "x"})


def test_a_cluster_that_does_not_answer_is_a_message_on_the_page():
    with ThreadedConsole("127.0.0.1:9", properties={"request.timeout.ms": "2000"}) as con:
        r = httpx.get(con.url + "/topics", timeout=30)
        assert r.status_code == 502 and "cannot reach the cluster" in r.text, r.text
