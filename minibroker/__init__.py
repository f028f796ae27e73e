"""minibroker: a pure-Python asyncio Kafka wire-protocol broker cluster.

    from minibroker import Cluster
    async with Cluster(brokers=3) as c:
        ...  # point any Kafka client at c.bootstrap

The public surface is `Cluster` and `ClusterConfig`; everything else is internal. Test helpers
live in `minibroker.testing`.
"""
from __future__ import annotations

import importlib
import warnings as _warnings
from importlib.metadata import PackageNotFoundError, version as _version

# kafka-python defines its message classes on import, reading each schema with
# importlib.resources.read_text (deprecated in Python 3.11-3.12): ~200 warnings that are not the
# user's, shown by pytest >= 9.2 when the plugin loads. Ignored for kafka-python's calls only,
# wherever minibroker first imports it (the package root itself stays light: PEP 562 below):
# read_text's warning names its caller; the open_text it calls inside names read_text's module,
# a duplicate of the first for any caller.
_warnings.filterwarnings("ignore", r"read_text is deprecated", DeprecationWarning,
                         module=r"kafka(\.|$)")
_warnings.filterwarnings("ignore", r"open_text is deprecated", DeprecationWarning,
                         module=r"importlib\.resources\._legacy")

_LAZY = {"Cluster": "minibroker.cluster", "ClusterConfig": "minibroker.config"}


def __getattr__(name: str):
    """Cluster and ClusterConfig load on first use, so `minibroker --version`, `--help` and
    the admin subcommands start without the broker (PEP 562)."""
    if name not in _LAZY:
        raise AttributeError(f"module 'minibroker' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


try:
    __version__ = _version("minibroker")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["Cluster", "ClusterConfig", "__version__"]
