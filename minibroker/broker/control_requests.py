"""The checks every controller request (LeaderAndIsr, StopReplica, UpdateMetadata) passes first.

KIP-380: a request carrying a broker epoch older than this broker's current registration was
meant for an earlier incarnation of it (sent before a restart): STALE_BROKER_EPOCH. Kafka skips
the check for -1 (requests from before KIP-380); our controller always sends the epoch, so -1 is
refused too. A newer epoch passes: the controller sends it as the registration commits, before
the broker has the answer. Then the controller epoch, as Kafka: older is
STALE_CONTROLLER_EPOCH, newer is adopted. Who may send these at all is the transport's and the
authorizer's business, as in Kafka: no control-plane port in one process, CLUSTER_ACTION when an
authorizer is on (broker/authorization.py).
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
    if req.broker_epoch < 0 or req.broker_epoch < ctx.node.broker_epoch:
        return int(StaleBrokerEpochError.errno)
    return ctx.replica_manager.check_controller_epoch(req.controller_epoch)
