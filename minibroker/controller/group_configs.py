"""Group configs (KIP-848's dynamic group configs, Kafka 4.0+): IncrementalAlterConfigs,
AlterConfigs and DescribeConfigs on GROUP resources (ConfigResource type 32), stored as
ConfigRecords of resource type GROUP under the group id, as Kafka's controller does.

Kafka's GroupConfig keys, each with the broker config that is its default (its synonym) and the
broker configs that bound it; values are checked with Kafka's messages (INVALID_CONFIG). A group
need not exist: Kafka stores and describes configs for any group id.
Not yet applied: the coordinators run every group with the broker-level values.
"""
from __future__ import annotations

from dataclasses import dataclass

from kafka.errors import InvalidConfigurationError, InvalidRequestError

from minibroker.config import ClusterConfig
from minibroker.controller.image import MetadataImage
from minibroker.controller.result import ItemResult, Result
from minibroker.controller import records

GROUP = records.GROUP


@dataclass(frozen=True)
class GroupKey:
    name: str
    type: str                   # Kafka's ConfigDef type: INT or STRING
    synonym: str                # the broker config giving the default
    default: str                # Kafka's default of that broker config
    low: tuple[str, int] | None = None     # (broker config, its Kafka default)
    high: tuple[str, int] | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""


def _liveness(group: str) -> tuple[GroupKey, GroupKey]:
    """`group`'s session timeout and heartbeat interval: consumer, share and streams groups have
    the same defaults and bounds (Kafka's GroupCoordinatorConfig / ShareGroupConfig /
    StreamsGroupConfig), under their own names."""
    return (GroupKey(f"{group}.session.timeout.ms", "INT", f"group.{group}.session.timeout.ms",
                     "45000", (f"group.{group}.min.session.timeout.ms", 45000),
                     (f"group.{group}.max.session.timeout.ms", 60000),
                     doc="The timeout to detect client failures when using the "
                         f"{group} group protocol."),
            GroupKey(f"{group}.heartbeat.interval.ms", "INT", f"group.{group}.heartbeat.interval.ms",
                     "5000", (f"group.{group}.min.heartbeat.interval.ms", 5000),
                     (f"group.{group}.max.heartbeat.interval.ms", 15000),
                     doc=f"The heartbeat interval given to the members of a {group} group."))


KEYS = {k.name: k for k in (
    *_liveness("consumer"),
    *_liveness("share"),
    GroupKey("share.record.lock.duration.ms", "INT", "group.share.record.lock.duration.ms",
             "30000", ("group.share.min.record.lock.duration.ms", 15000),
             ("group.share.max.record.lock.duration.ms", 60000),
             doc="The record acquisition lock duration in milliseconds for share groups."),
    GroupKey("share.auto.offset.reset", "STRING", "share.auto.offset.reset", "latest",
             choices=("latest", "earliest"),
             doc="What to do when there is no initial offset in Kafka for a share group."),
    *_liveness("streams"),
    GroupKey("streams.num.standby.replicas", "INT", "group.streams.num.standby.replicas", "0",
             ("", 0), ("group.streams.max.standby.replicas", 2),
             doc="The number of standby replicas for each task of a streams group."),
)}
# Pairs Kafka checks against each other: an interval must be below its session timeout.
_BELOW = {"consumer.heartbeat.interval.ms": "consumer.session.timeout.ms",
          "share.heartbeat.interval.ms": "share.session.timeout.ms",
          "streams.heartbeat.interval.ms": "streams.session.timeout.ms"}


def broker_value(config: ClusterConfig, key: GroupKey) -> tuple[str, bool]:
    """The broker-level value of `key` (its synonym), and whether the broker sets it."""
    described = config.describe()
    if key.synonym in described:
        return described[key.synonym], described[key.synonym] != key.default
    return key.default, False


def _bound(config: ClusterConfig, bound: tuple[str, int]) -> int:
    name, default = bound
    raw = config.extra.get(name) if name else None
    return int(raw) if raw is not None else default


def check(config: ClusterConfig, values: dict[str, str]) -> str | None:
    """Kafka's GroupConfig.validate on the values a group would have; None when valid."""
    for name in sorted(values):
        key = KEYS.get(name)
        if key is None:
            return f"Unknown group config name: {name}"
        value = values[name].strip()
        if key.type == "INT":
            try:
                number = int(value)
            except ValueError:
                return f"Invalid value {values[name]} for configuration {name}: " \
                       "Not a number of type INT"
            if key.low and number < _bound(config, key.low):
                return f"{name} must be greater than or equal to {key.low[0] or 0}"
            if key.high and number > _bound(config, key.high):
                return f"{name} must be less than or equal to {key.high[0]}"
        elif value.lower() not in key.choices:
            return f"Invalid value {values[name]} for configuration {name}: " \
                   f"String must be one of: {', '.join(key.choices)}"
    for interval, session in _BELOW.items():
        if interval in values or session in values:
            i = int(values.get(interval, broker_value(config, KEYS[interval])[0]))
            s = int(values.get(session, broker_value(config, KEYS[session])[0]))
            if i >= s:
                return f"{interval} must be less than {session}"
    return None


def alter_group_configs(image: MetadataImage, config: ClusterConfig, group_id: str,
                        changes: dict[str, str | None], replace: bool = False
                        ) -> Result[ItemResult]:
    """ConfigRecords setting (value) or removing (None) the group's configs; `replace`: the
    legacy AlterConfigs, where what is not given is removed."""
    if not group_id:
        return Result((), ItemResult(InvalidRequestError.errno, "Group name can't be empty."))
    current = dict(image.group_configs.get(group_id, {}))
    if replace:
        changes = {**{k: None for k in current}, **changes}
    unknown = sorted(k for k in changes if k not in KEYS)
    if unknown:
        return Result((), ItemResult(InvalidConfigurationError.errno,
                                     f"Unknown group config name: {unknown[0]}"))
    after = {k: v for k, v in {**current, **changes}.items() if v is not None}
    problem = check(config, after)
    if problem:
        return Result((), ItemResult(InvalidConfigurationError.errno, problem))
    return Result(tuple(records.group_config(group_id, k, None if v is None else v.strip())
                        for k, v in sorted(changes.items())), ItemResult(0))
