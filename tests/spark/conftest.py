"""One SparkSession (local[2]) and one broker cluster for every Spark test of the run.

The test command installs the `spark` extra and Java 17 (README, .ci/run, conformance/install.sh):
a missing pyspark or java fails these tests, like a missing conformance client.  Leaving Spark out
on purpose: a MINIBROKER_CLIENTS list without `spark` (e.g. `python`) skips them, saying so.
"""
from __future__ import annotations

import os
import shutil

import pytest

_missing = None
try:
    import pyspark  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
except ImportError as e:                       # pragma: no cover - depends on the install
    _missing = f"the spark extra is not installed ({e}): pip install -e '.[test,fast,spark]'"
if _missing is None and shutil.which("java") is None:
    _missing = "no java on PATH (Spark needs Java 17 or 21): apt-get install openjdk-17-jre-headless"


def _selected() -> bool:
    raw = os.environ.get("MINIBROKER_CLIENTS", "").strip() or "all"
    words = {w.strip() for w in raw.split(",")}
    return "all" in words or "spark" in words


def pytest_collection_modifyitems(config, items) -> None:
    if _selected():
        return                                 # a missing install fails in the `spark` fixture
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(
                reason=f"spark not selected (MINIBROKER_CLIENTS={os.environ.get('MINIBROKER_CLIENTS')})"))


@pytest.fixture(scope="session")
def spark():
    if _missing is not None:
        pytest.fail(_missing + " (or leave Spark out: MINIBROKER_CLIENTS without 'spark')")
    from minibroker.spark.session import local_session
    session = local_session("local[2]", "minibroker-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka():
    """A 3-broker minibroker cluster on loopback, in a background thread."""
    from minibroker.testing.threaded import ThreadedCluster
    tc = ThreadedCluster(brokers=3, group_initial_rebalance_delay_ms=0,
                         partition_deletion_check_interval_ms=500).start()
    yield tc
    tc.stop()

