"""One SparkSession (local[2]) and one broker cluster for every Spark test of the run.

The test command installs the `spark` extra and Java 17 (README, .ci/run, conformance/install.sh).
Without them these tests are skipped, saying why; MINIBROKER_CLIENTS naming `spark` makes a
missing pyspark or java fail them instead, like a missing conformance client. Leaving Spark out
on purpose: a MINIBROKER_CLIENTS list without `spark` (e.g. `python`) skips them, saying so.
"""
from __future__ import annotations

import os
import shutil

import pytest

from test_local_cluster import start_local_cluster_job

_missing = None
try:
    import pyspark  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
except ImportError as e:                       # pragma: no cover - depends on the install
    _missing = f"the spark extra is not installed ({e}): pip install -e '.[test,fast,spark]'"
if _missing is None and shutil.which("java") is None:
    _missing = "no java on PATH (Spark needs Java 17 or 21): apt-get install openjdk-17-jre-headless"


def _named() -> bool:
    return "spark" in {w.strip() for w in os.environ.get("MINIBROKER_CLIENTS", "").split(",")}


if _missing is not None and not _named():
    class _WithoutExtra(pytest.Module):
        """A Spark test module in a run without the extra: skipped, saying why, before its
        imports (pandas, pyarrow, numpy) could fail collection."""

        def collect(self):
            pytest.skip(_missing, allow_module_level=True)

    def pytest_pycollect_makemodule(module_path, parent):
        return _WithoutExtra.from_parent(parent, path=module_path)


def _selected() -> bool:
    raw = os.environ.get("MINIBROKER_CLIENTS", "").strip() or "all"
    words = {w.strip() for w in raw.split(",")}
    return "all" in words or "spark" in words


def pytest_collection_modifyitems(config, items) -> None:
    here = os.path.dirname(__file__)
    if _selected():
        # the local-cluster test last: its process runs while the other Spark tests do
        last = [i for i in items if os.path.basename(str(i.fspath)) == "test_local_cluster.py"]
        if last:
            rest = [i for i in items if i not in last]
            at = max((n for n, i in enumerate(rest) if str(i.fspath).startswith(here)), default=-1)
            items[:] = rest[:at + 1] + last + rest[at + 1:]
        return                                 # a missing install fails in the `spark` fixture
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.skip(
                reason=f"spark not selected (MINIBROKER_CLIENTS={os.environ.get('MINIBROKER_CLIENTS')})"))


def _require_extra() -> None:
    """Skip without the spark extra or java, unless MINIBROKER_CLIENTS asked for spark by name."""
    if _missing is None:
        return
    if _named():
        pytest.fail(_missing + " (or leave Spark out: MINIBROKER_CLIENTS without 'spark')")
    pytest.skip(_missing)


@pytest.fixture(scope="session")
def spark():
    _require_extra()
    from minibroker.spark.session import local_session
    session = local_session("local[2]", "minibroker-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def local_cluster_job(request):
    """The local-cluster process of test_local_cluster, started by the first Spark test."""
    _require_extra()
    proc = start_local_cluster_job(request.getfixturevalue("kafka"))
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(30)


@pytest.fixture(autouse=True)
def _local_cluster_early(request) -> None:
    """Starts `local_cluster_job` with the first Spark test that runs, when the run has the test."""
    if any(os.path.basename(str(i.fspath)) == "test_local_cluster.py" for i in request.session.items):
        request.getfixturevalue("local_cluster_job")


@pytest.fixture(scope="session")
def kafka():
    """A 3-broker minibroker cluster on loopback, in a background thread."""
    from minibroker.testing.threaded import ThreadedCluster
    tc = ThreadedCluster(brokers=3, group_initial_rebalance_delay_ms=0,
                         partition_deletion_check_interval_ms=500).start()
    yield tc
    tc.stop()

