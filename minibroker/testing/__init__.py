"""Shipped for users, like trio.testing: virtual time, a threaded cluster, a pytest plugin."""
from minibroker.testing.threaded import ThreadedCluster
from minibroker.testing.virtual_time import VirtualTimeLoop

__all__ = ["ThreadedCluster", "VirtualTimeLoop"]
