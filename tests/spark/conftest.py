"""One SparkSession (local[2]) and one broker cluster for every Spark test of the run.

CI installs the `spark` extra and Java 17 (.ci/run, conformance/install.sh): there a missing
pyspark or java is an error, not a skip.  Elsewhere the tests skip with the reason.
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
    _missing = f"the spark extra is not installed ({e}): pip install -e '.[spark]'"
if _missing is None and shutil.which("java") is None:
    _missing = "no java on PATH (Spark needs Java 17 or 21): apt-get install openjdk-17-jre-headless"


def pytest_collection_modifyitems(config, items) -> None:
    if _missing is None or os.environ.get("CI"):
        return                                 # in CI the `spark` fixture fails instead
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(reason=_missing))


@pytest.fixture(scope="session")
def spark():
    if _missing is not None:
        pytest.fail(_missing)
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

