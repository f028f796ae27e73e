"""The broker's one way to the controller, declared once (broker/context.py's ControllerChannel)
and implemented twice: in process (cluster.ControllerChannel) and across processes
(processes.RemoteControllerChannel, each call to whichever broker process runs the active
controller, which answers CALLS only).
A method added to, renamed in or re-parametrized in one of them alone fails here."""
from __future__ import annotations

import inspect

from minibroker.broker.context import ControllerChannel
from minibroker.cluster import ControllerChannel as InProcessChannel
from minibroker.processes import CALLS, RemoteControllerChannel

from tests.broker.test_services import mismatches


def _public_methods(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}


DECLARED = _public_methods(ControllerChannel)


def test_the_protocol_declares_every_controller_call():
    assert {"alter_partition", "elect_leaders", "create_acls"} <= DECLARED


def test_the_in_process_channel_is_exactly_the_protocol():
    assert mismatches(ControllerChannel, InProcessChannel) == []
    assert _public_methods(InProcessChannel) == DECLARED


def test_the_inter_process_channel_is_exactly_the_protocol():
    assert mismatches(ControllerChannel, RemoteControllerChannel) == []
    # call() is the router's own (one call to the active controller, again on NOT_CONTROLLER).
    assert _public_methods(RemoteControllerChannel) - {"call"} == DECLARED


def test_a_broker_process_answers_every_declared_call_and_nothing_else():
    assert CALLS == DECLARED


def test_every_remote_method_sends_its_own_name():
    """A copy-paste slip (elect_leaders sending "assign_partitions") would reach the wrong
    controller method: each method's body names itself."""
    for name in sorted(DECLARED):
        assert f'"{name}"' in inspect.getsource(getattr(RemoteControllerChannel, name)), name
