"""Shipped for users, like trio.testing: virtual time, a threaded cluster, a pytest plugin, and
seeded simulations of a cluster under faults."""
from minibroker.testing.security import security_config
from minibroker.testing.simulation import Simulation, SimulationResult, SimulationViolation
from minibroker.testing.threaded import ThreadedCluster
from minibroker.testing.virtual_time import VirtualTimeLoop

__all__ = ["Simulation", "SimulationResult", "SimulationViolation", "ThreadedCluster",
           "VirtualTimeLoop", "security_config"]
