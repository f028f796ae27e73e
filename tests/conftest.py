"""Tests run on virtual time unless they say otherwise.

pytest-asyncio 1.5 builds each test's event loop through the `pytest_asyncio_loop_factories` hook
(one factory per item here, so no extra parametrization). Async tests and their async fixtures run
on `VirtualTimeLoop`: a one-hour `asyncio.sleep` or a 60 s Fetch long-poll returns at once, real
loopback sockets still work, a true deadlock raises instead of hanging, and a livelock (virtual
time standing still while callbacks spin) raises RealTimeLimitExceeded after the test's timeout.

    @pytest.mark.real_time          # threads (kafka-python in a thread, ThreadedCluster, ...)
    async def test_with_a_thread(): ...

A module can opt out as a whole with `pytestmark = pytest.mark.real_time`.
Every test is also bounded in real time (pytest-timeout, `DEFAULT_TIMEOUT_S` unless marked).
"""
from __future__ import annotations

import asyncio
import functools

import pytest

from minibroker.cluster import Cluster
from minibroker.testing.virtual_time import VirtualTimeLoop

DEFAULT_TIMEOUT_S = 60


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", "real_time: run this asyncio test on a real-time event loop (tests using "
                   "threads); the default in tests/ is minibroker.testing.VirtualTimeLoop")
    config.addinivalue_line(
        "markers", "cluster(**config): options of the `cluster` fixture's Cluster")


def _timeout_s(item, config) -> float:
    """The test's real-time budget: its timeout mark, else --timeout / ini, else the default."""
    mark = item.get_closest_marker("timeout")
    if mark is not None and (mark.args or "timeout" in mark.kwargs):
        return float(mark.args[0] if mark.args else mark.kwargs["timeout"])
    option = config.getoption("timeout", None) if config.pluginmanager.hasplugin("timeout") \
        else None
    return float(option) if option else DEFAULT_TIMEOUT_S


def pytest_asyncio_loop_factories(config, item):
    if item.get_closest_marker("real_time") is not None:
        return {"real_time": asyncio.SelectorEventLoop}
    # pytest-timeout's signal cannot stop a livelocked loop (asyncio swallows exceptions raised
    # in callbacks); the loop's own real-time limit raises out of run_until_complete instead.
    limit = max(_timeout_s(item, config) - 5, 1)
    return {"virtual_time": functools.partial(VirtualTimeLoop, real_time_limit=limit)}


def pytest_collection_modifyitems(config, items) -> None:
    if not config.pluginmanager.hasplugin("timeout") or config.getoption("timeout", None):
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TIMEOUT_S))


@pytest.fixture
async def virtual_time() -> VirtualTimeLoop:
    """The running VirtualTimeLoop (fails the test if it runs on the real loop)."""
    loop = asyncio.get_running_loop()
    assert isinstance(loop, VirtualTimeLoop), "this test needs virtual time (no real_time mark)"
    return loop


@pytest.fixture
async def cluster(request):
    """A started 3-broker cluster; `@pytest.mark.cluster(brokers=..., **config)` changes it."""
    marker = request.node.get_closest_marker("cluster")
    kw = dict(marker.kwargs) if marker is not None else {}
    async with Cluster(**{"brokers": 3, **kw}) as c:
        yield c
