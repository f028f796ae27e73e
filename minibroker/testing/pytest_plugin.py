"""pytest plugin (entry point `pytest11`): a `minibroker_cluster` fixture for any client's tests.

    def test_my_client(minibroker_cluster):
        client = MyClient(bootstrap_servers=minibroker_cluster.bootstrap)

Options: --minibroker-brokers N (default 3).
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser) -> None:
    group = parser.getgroup("minibroker")
    group.addoption("--minibroker-brokers", type=int, default=3,
                    help="brokers in the minibroker_cluster fixture (default 3)")


@pytest.fixture(scope="session")
def minibroker_cluster(request):
    from minibroker.testing.threaded import ThreadedCluster
    with ThreadedCluster(brokers=request.config.getoption("--minibroker-brokers"),
                         group_initial_rebalance_delay_ms=0) as cluster:
        yield cluster
