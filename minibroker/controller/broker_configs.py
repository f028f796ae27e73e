"""Dynamic broker configs (IncrementalAlterConfigs on BROKER resources), as ConfigRecords.

Only the replication throttle rates are dynamic here (`leader.replication.throttled.rate`,
`follower.replication.throttled.rate`, bytes/s, Kafka's LONG >= 0), per broker id or for the
cluster default (resource name ""). The image keeps them per resource; every UpdateMetadata
carries them (tagged BrokerConfigs), and each broker applies its own over the default
(minibroker.broker.throttle). Any other name: INVALID_REQUEST, as before.
"""
from __future__ import annotations

from kafka.errors import InvalidConfigurationError, InvalidRequestError

from minibroker.config import DYNAMIC_BROKER_CONFIGS as RATE_CONFIGS
from minibroker.controller.image import MetadataImage
from minibroker.controller.result import ItemResult, Result
from minibroker.protocol import records as R

BROKER = 4


def alter_broker_configs(image: MetadataImage, resource_name: str,
                         changes: dict[str, str | None]) -> Result[ItemResult]:
    if resource_name and not (resource_name.isdigit() and int(resource_name) in image.brokers):
        return Result((), ItemResult(InvalidRequestError.errno,
                                     f"Unknown broker id {resource_name}"))
    for k, v in sorted(changes.items()):
        if k not in RATE_CONFIGS:
            return Result((), ItemResult(
                InvalidRequestError.errno, f"Dynamic broker config {k} is not supported (only "
                f"{', '.join(RATE_CONFIGS)} are)."))
        if v is not None and not (v.strip().isdigit() and int(v) <= 2**63 - 1):
            return Result((), ItemResult(
                InvalidConfigurationError.errno,
                f"Invalid value {v} for configuration {k}: Not a number of type LONG"
                if not v.strip().lstrip("-").isdigit() else
                f"Invalid value {v} for configuration {k}: Value must be at least 0"))
    return Result(tuple(R.ConfigRecord(resource_type=BROKER, resource_name=resource_name, name=k,
                                       value=None if v is None else v.strip())
                        for k, v in sorted(changes.items())), ItemResult(0))
