"""Dynamic broker configs (KIP-226: AlterConfigs / IncrementalAlterConfigs on BROKER resources),
as ConfigRecords of resource type BROKER, per broker id or for the cluster default (resource
name "").

Kafka's dynamic configs (minibroker.controller.dynamic_broker_configs) are accepted, checked with
Kafka's value messages and stored; the per-broker ones (listener and SSL/SASL settings) need a
broker id. Configs Kafka keeps read-only are refused, named ("Cannot update these configs
dynamically: Set(broker.id)"); names Kafka does not know are stored as custom configs, as Kafka
does. The image keeps them per resource; every UpdateMetadata carries them (tagged
BrokerConfigs), and each broker applies its own over the default (the replication throttle
rates drive minibroker.broker.throttle; the others are described).
AlterConfigs (replace=True) replaces the resource's whole dynamic set, as Kafka's legacy API does.
"""
from __future__ import annotations

from kafka.errors import InvalidConfigurationError, InvalidRequestError

from minibroker.config import ClusterConfig
from minibroker.controller import dynamic_broker_configs as dyn
from minibroker.controller import records
from minibroker.controller.image import MetadataImage
from minibroker.controller.result import ItemResult, Result
from minibroker.log.config import BROKER_CONFIGS

# Broker configs Kafka knows that are not dynamic (beyond ClusterConfig's own names).
_KNOWN_STATIC = frozenset({
    "broker.id", "node.id", "process.roles", "log.dirs", "log.dir", "broker.rack",
    "controller.quorum.voters", "controller.quorum.bootstrap.servers", "controller.listener.names",
    "inter.broker.listener.name", "metadata.log.dir", "num.network.threads",
    "replica.selector.class", "socket.request.max.bytes", "zookeeper.connect"}) - dyn.ALL_DYNAMIC


def read_only(name: str) -> bool:
    if dyn.is_dynamic(name):
        return False
    return name in _KNOWN_STATIC or name in ClusterConfig.kafka_names() or name in BROKER_CONFIGS


def alter_broker_configs(image: MetadataImage, resource_name: str,
                         changes: dict[str, str | None], replace: bool = False
                         ) -> Result[ItemResult]:
    if resource_name and not (resource_name.isdigit() and int(resource_name) in image.brokers):
        return Result((), ItemResult(InvalidRequestError.errno,
                                     f"Unknown broker id {resource_name}"))
    fixed = sorted(k for k in changes if read_only(k))
    if fixed:
        return Result((), ItemResult(InvalidRequestError.errno, "Cannot update these configs "
                                     f"dynamically: Set({', '.join(fixed)})"))
    per_broker = sorted(k for k, v in changes.items() if dyn.is_per_broker(k) and v is not None)
    if not resource_name and per_broker:
        return Result((), ItemResult(
            InvalidRequestError.errno, "Cannot update these configs at default cluster level, "
            f"broker id must be specified: Set({', '.join(per_broker)})"))
    for k, v in sorted(changes.items()):
        problem = None if v is None else dyn.check_value(k, v)
        if problem:
            return Result((), ItemResult(InvalidConfigurationError.errno, problem))
    if replace:     # AlterConfigs: what is not given goes back to its static value
        current = image.broker_configs.get(resource_name, {})
        changes = {**{k: None for k in current}, **changes}
    return Result(tuple(records.broker_config(resource_name, k, None if v is None else v.strip())
                        for k, v in sorted(changes.items())), ItemResult(0))
