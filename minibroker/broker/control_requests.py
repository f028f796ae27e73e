"""The checks every controller request (LeaderAndIsr, StopReplica, UpdateMetadata) passes first.

KIP-380: a request carrying a broker epoch older than this broker's current registration was
meant for an earlier incarnation of it (sent before a restart): STALE_BROKER_EPOCH. -1 (unknown)
is not checked, as Kafka's isBrokerEpochStale. Then the controller epoch, as before.
"""
from __future__ import annotations

from typing import Protocol

from kafka.errors import StaleBrokerEpochError

from minibroker.broker.context import RequestContext


class ControlRequest(Protocol):
    """LeaderAndIsr, StopReplica and UpdateMetadata: what the checks read of each."""
    broker_epoch: int
    controller_epoch: int


def check_control_request(ctx: RequestContext, req: ControlRequest) -> int:
    if 0 <= req.broker_epoch < ctx.node.broker_epoch:
        return StaleBrokerEpochError.errno
    return ctx.replica_manager.check_controller_epoch(req.controller_epoch)
