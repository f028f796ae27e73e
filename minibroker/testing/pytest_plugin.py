"""pytest plugin (entry point `pytest11`): running clusters for any client's tests.

    def test_my_client(minibroker_cluster):            # one cluster for the whole session
        client = MyClient(bootstrap_servers=minibroker_cluster.bootstrap)

    def test_failover(minibroker_fresh_cluster):       # a new cluster for this test alone
        minibroker_fresh_cluster.stop_broker(1)

Both are `minibroker.testing.ThreadedCluster`s: the cluster runs on its own event loop in a
thread, and the control API is synchronous (call it from sync or async tests alike).
`minibroker_cluster` is session-scoped: topics, records, groups and stopped brokers carry over
from one test to the next (use unique topic names, restart what you stop). Both set
group.initial.rebalance.delay.ms=0 (Kafka's 3000 would delay every first group join by 3 s).

Options: --minibroker-brokers N (default 3), --minibroker-kafka-version X.Y (emulate a Kafka
release's ApiVersions, 2.1 to 4.1), --minibroker-trace (the fixtures' clusters keep a protocol
trace; a failing test's report gets a "minibroker trace" section with the requests and responses
seen while it ran, as a timeline — Playwright's trace-on-failure), --minibroker-strict (strict
mode: a test during which a client broke a protocol rule fails, naming the rule; the list is
`minibroker_cluster.violations`). Security (or any ClusterConfig setting): override the
session fixture `minibroker_config` in your conftest.py, e.g. with
`minibroker.testing.security_config("SASL_SSL", tls_dir=..., users=["alice:secret"])`
(docs/security.md); `cluster.ca_file` is then the CA to trust.
"""
from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import pytest

from minibroker.broker.timeline import timeline_line

# kafka-python reads its message schemas with importlib.resources.read_text, deprecated in Python
# 3.11-3.12, once per message class it defines: noise the user's suite did not cause. Warnings
# kafka-python raises about the user's own calls point at the user's module and still show.
KAFKA_PYTHON_WARNINGS = (
    "ignore::DeprecationWarning:kafka",
    "ignore:read_text is deprecated:DeprecationWarning",
    "ignore:open_text is deprecated:DeprecationWarning",
)

FIXTURE_CONFIG = {"group_initial_rebalance_delay_ms": 0}


def pytest_addoption(parser) -> None:
    group = parser.getgroup("minibroker")
    group.addoption("--minibroker-brokers", type=int, default=3,
                    help="brokers in the minibroker_cluster fixtures (default 3)")
    group.addoption("--minibroker-kafka-version", default=None, metavar="X.Y",
                    help="emulate this Kafka release in the minibroker_cluster fixtures")
    group.addoption("--minibroker-trace", action="store_true",
                    help="trace the fixtures' clusters; a failing test's report shows the "
                         "requests and responses seen while it ran")
    group.addoption("--minibroker-strict", action="store_true",
                    help="strict mode: a test during which a client breaks a protocol rule fails")


def pytest_configure(config) -> None:
    for line in KAFKA_PYTHON_WARNINGS:      # ini filters: -W on the command line still wins
        config.addinivalue_line("filterwarnings", line)


# Trace files of the fixtures' running clusters (--minibroker-trace), and their clusters.
_TRACES: dict[str, Any] = {}
_STRICT: list = []          # the fixtures' running ThreadedClusters in strict mode
_TRACE_START = pytest.StashKey[dict]()


def _cluster(request, config: dict):
    from minibroker.testing.threaded import ThreadedCluster
    trace = None
    if request.config.getoption("--minibroker-trace"):
        fd, trace = tempfile.mkstemp(prefix="minibroker-trace-", suffix=".jsonl")
        os.close(fd)
    strict = request.config.getoption("--minibroker-strict")
    cluster = ThreadedCluster(brokers=request.config.getoption("--minibroker-brokers"),
                              kafka_version=request.config.getoption("--minibroker-kafka-version"),
                              trace=trace, strict=strict, **{**FIXTURE_CONFIG, **config})
    if strict:
        _STRICT.append(cluster)
    if trace is not None:
        _TRACES[trace] = cluster
    return cluster


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    # Where each trace stood before the test (a cluster its fixtures start begins at 0).
    item.stash[_TRACE_START] = {p: _size(p) for p in _TRACES}
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    before = {id(c): len(c.violations) for c in _STRICT if c.cluster is not None}
    outcome = yield
    new = [v for c in _STRICT if c.cluster is not None for v in c.violations[before.get(id(c), 0):]]
    if new and outcome.excinfo is None:
        outcome.force_exception(AssertionError(
            f"minibroker strict mode: {len(new)} protocol violation(s): " + "; ".join(
                f"{v['rule']} by {v.get('client_id')!r} ({v.get('api')} v{v.get('version')}): "
                f"{v['detail']} [{v['reference']}]" for v in new)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed or not _TRACES:
        return
    start = item.stash.get(_TRACE_START, {})
    for path, cluster in list(_TRACES.items()):
        cluster.flush_trace()               # the tracer writes its lines on a timer
        with open(path, "rb") as f:
            f.seek(start.get(path, 0))
            lines = [timeline_line(json.loads(raw), False) for raw in f.read().splitlines()
                     if raw.strip()]
        if lines:
            report.sections.append((f"minibroker trace ({path})", "\n".join(lines)))


@pytest.fixture(scope="session")
def minibroker_config() -> dict:
    """ClusterConfig settings of both cluster fixtures; override it for security settings."""
    return {}


@pytest.fixture(scope="session")
def minibroker_cluster(request, minibroker_config):
    """A running cluster shared by the whole session (state carries over between tests)."""
    with _cluster(request, minibroker_config) as cluster:
        yield cluster
    _forget_trace(cluster)


@pytest.fixture
def minibroker_fresh_cluster(request, minibroker_config):
    """A new running cluster for this test only, stopped after it."""
    with _cluster(request, minibroker_config) as cluster:
        yield cluster
    _forget_trace(cluster)


def _forget_trace(cluster) -> None:
    if cluster in _STRICT:
        _STRICT.remove(cluster)
    path = cluster._kw.get("trace")
    _TRACES.pop(path, None)
