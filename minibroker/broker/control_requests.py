"""The checks every controller request (LeaderAndIsr, StopReplica, UpdateMetadata) passes first.

KIP-380: a request carrying a broker epoch older than this broker's current registration was
meant for an earlier incarnation of it (sent before a restart): STALE_BROKER_EPOCH. -1 (unknown)
is not checked, as Kafka's isBrokerEpochStale. Then the controller epoch, as before.
"""
from __future__ import annotations

from typing import Any

from kafka.errors import StaleBrokerEpochError


def check_control_request(broker: Any, req: Any) -> int:
    if 0 <= req.broker_epoch < broker.broker_epoch:
        return StaleBrokerEpochError.errno
    return broker.replica_manager.check_controller_epoch(req.controller_epoch)
