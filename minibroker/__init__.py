"""minibroker: a pure-Python asyncio Kafka wire-protocol broker cluster.

    from minibroker import Cluster
    async with Cluster(brokers=3) as c:
        ...  # point any Kafka client at c.bootstrap

The public surface is `Cluster` and `ClusterConfig`; everything else is internal. Test helpers
live in `minibroker.testing`.
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version as _version

from minibroker.cluster import Cluster
from minibroker.config import ClusterConfig

try:
    __version__ = _version("minibroker")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["Cluster", "ClusterConfig", "__version__"]
