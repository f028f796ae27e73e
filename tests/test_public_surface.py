"""The package's public surface is pinned: adding to it is a decision, not an accident."""
from __future__ import annotations

import subprocess
import sys

import minibroker


def test_all_is_pinned():
    assert minibroker.__all__ == ["Cluster", "ClusterConfig", "__version__"]


def test_public_names_are_the_real_classes():
    from minibroker.cluster import Cluster
    from minibroker.config import ClusterConfig
    assert minibroker.Cluster is Cluster
    assert minibroker.ClusterConfig is ClusterConfig


def test_version_is_the_installed_distribution_version():
    from importlib.metadata import version
    assert minibroker.__version__ == version("minibroker")


def test_star_import_exports_exactly_all():
    ns: dict = {}
    exec("from minibroker import *", ns)
    assert sorted(k for k in ns if k != "__builtins__") == sorted(minibroker.__all__)


def test_import_is_cheap_and_side_effect_free():
    """Importing minibroker starts no loop or thread and does not print."""
    out = subprocess.run([sys.executable, "-c", "import threading, minibroker; "
                          "assert threading.active_count() == 1; print('ok')"],
                         capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout, out.stderr) == (0, "ok\n", "")


async def test_cluster_config_reaches_the_cluster():
    cfg = minibroker.ClusterConfig(brokers=1, seed=7)
    async with minibroker.Cluster(cfg, min_insync_replicas=1) as c:
        assert c.config == cfg
        assert len(c.brokers) == 1
