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
release's ApiVersions, 2.1 to 4.1).
"""
from __future__ import annotations

import pytest

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


def pytest_configure(config) -> None:
    for line in KAFKA_PYTHON_WARNINGS:      # ini filters: -W on the command line still wins
        config.addinivalue_line("filterwarnings", line)


def _cluster(request):
    from minibroker.testing.threaded import ThreadedCluster
    return ThreadedCluster(brokers=request.config.getoption("--minibroker-brokers"),
                           kafka_version=request.config.getoption("--minibroker-kafka-version"),
                           **FIXTURE_CONFIG)


@pytest.fixture(scope="session")
def minibroker_cluster(request):
    """A running cluster shared by the whole session (state carries over between tests)."""
    with _cluster(request) as cluster:
        yield cluster


@pytest.fixture
def minibroker_fresh_cluster(request):
    """A new running cluster for this test only, stopped after it."""
    with _cluster(request) as cluster:
        yield cluster
