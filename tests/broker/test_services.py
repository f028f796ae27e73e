"""The broker's services behind the Protocols handlers see (broker/context.py): each concrete
class has every member its Protocol declares, with the same parameters, so a handler typed
against the Protocol runs against the real thing. A member added to a Protocol and not to its
implementation (or renamed in one only) fails here."""
from __future__ import annotations

import inspect
from typing import Protocol

import pytest

from minibroker.broker import context
from minibroker.broker.broker import Broker
from minibroker.broker.controller_quota import ControllerMutationQuota
from minibroker.broker.faults import Faults
from minibroker.broker.fetch_session import FetchSessionCache
from minibroker.broker.replica_manager import ReplicaManager
from minibroker.broker.stats import BrokerStats
from minibroker.broker.trace import _Exchange
from minibroker.broker.txn_channel import TxnChannel
from minibroker.controller.result import ItemResult
from minibroker.coordinator.runtime import GroupCoordinatorRuntime
from minibroker.coordinator.txn.coordinator import TransactionCoordinator


def _declared(proto: type) -> dict[str, object]:
    """The Protocol's own members: methods, properties and annotated attributes."""
    members = {n: v for n, v in vars(proto).items()
               if not n.startswith("_") and (callable(v) or isinstance(v, property))}
    members.update({n: None for n in vars(proto).get("__annotations__", {})})
    return members


def _params(fn: object) -> list[tuple[str, object]]:
    params = inspect.signature(fn).parameters.values()  # type: ignore[arg-type]
    return [(p.name, p.default) for p in params if p.name != "self"]


def mismatches(proto: type, impl: type, instance_attrs: frozenset[str] = frozenset()) -> list[str]:
    """What `impl` lacks of `proto`, or has with other parameters. Attributes set in __init__
    are not on the class: `instance_attrs` names them."""
    out = []
    for name, declared in sorted(_declared(proto).items()):
        if name in instance_attrs:
            continue
        found = inspect.getattr_static(impl, name, None)
        if found is None:
            out.append(f"{impl.__name__} lacks {name}")
        elif callable(declared) and not isinstance(declared, property):
            fn = found.__func__ if isinstance(found, (staticmethod, classmethod)) else found
            if _params(declared) != _params(fn):
                out.append(f"{impl.__name__}.{name}{_params(fn)} != {proto.__name__}'s "
                           f"{_params(declared)}")
    return out


IMPLEMENTATIONS = [
    (context.ReplicaManagerService, ReplicaManager, {"log_memory"}),
    (context.GroupCoordinatorService, GroupCoordinatorRuntime,
     {"classic", "offsets", "consumer", "positions"}),
    (context.TransactionCoordinatorService, TransactionCoordinator, set()),
    (context.TxnVerifier, TxnChannel, set()),
    (context.MutationQuota, ControllerMutationQuota, set()),
    (context.FaultHooks, Faults, {"armed", "latency_ms", "update_metadata_delay_ms"}),
    (context.RequestStats, BrokerStats, set()),
    (context.FetchSessions, FetchSessionCache, set()),
    (context.ItemResult, ItemResult, set()),
    (context.RequestObserver, _Exchange, set()),
    (context.LocalBroker, Broker, {"node_id", "host", "port", "rack", "broker_epoch", "running",
                                   "dynamic_configs", "fault_admin"}),
]


@pytest.mark.parametrize("proto, impl, attrs", IMPLEMENTATIONS,
                         ids=[p.__name__ for p, _, _ in IMPLEMENTATIONS])
def test_each_service_implements_its_protocol(proto, impl, attrs):
    assert mismatches(proto, impl, frozenset(attrs)) == []


def test_every_service_protocol_is_checked():
    protocols = {v for v in vars(context).values() if isinstance(v, type) and
                 issubclass(v, Protocol) and v is not Protocol and v.__module__ == context.__name__}
    checked = {p for p, _, _ in IMPLEMENTATIONS}
    # ControllerChannel: tests/test_controller_channel.py; Connection: network/'s; FaultAdmin:
    # the cluster's FaultControl runner; ExchangeObserver: broker/trace.py's Tracer (its
    # dispatch names the Services parameter `broker`).
    assert {p.__name__ for p in protocols - checked} <= {"ControllerChannel", "Connection",
                                                         "FaultAdmin", "ExchangeObserver"}


def test_the_checker_sees_a_missing_member_and_other_parameters():
    class P(Protocol):
        def a(self, x: int) -> None: ...
        def b(self, y: int) -> None: ...

    class Impl:
        def a(self, x: int, z: int = 0) -> None: ...

    assert mismatches(P, Impl) == ["Impl.a[('x', <class 'inspect._empty'>), ('z', 0)] != P's "
                                   "[('x', <class 'inspect._empty'>)]", "Impl lacks b"]
