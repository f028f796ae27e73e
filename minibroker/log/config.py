"""Topic-level log configuration (Kafka's LogConfig), names mapped dots -> underscores.

`DEFAULTS` (Kafka name -> default as a string) and `validate(name, value)` serve DescribeConfigs and
AlterConfigs; validation errors are ValueErrors with Kafka's ConfigException wording, e.g.
"Invalid value abc for configuration retention.ms: Not a number of type LONG".
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Mapping

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")


@dataclass(frozen=True)
class LogConfig:
    max_message_bytes: int = 1048588
    retention_ms: int = 604800000           # -1: no time limit
    retention_bytes: int = -1               # -1: no size limit
    message_timestamp_type: str = "CreateTime"
    cleanup_policy: str = "delete"          # "delete", "compact" or "compact,delete"
    min_insync_replicas: int = 1
    segment_bytes: int = 1073741824
    enable_ordered_delivery: bool = True    # KIP-253's topic config
    # Replication throttling (kafka-reassign-partitions --throttle): "partition:broker,..." or "*",
    # the replicas whose leader-side answers / follower-side fetches the broker's
    # {leader,follower}.replication.throttled.rate limit (minibroker.broker.throttle).
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def deletes(self) -> bool:
        """Whether time/size retention applies (cleanup.policy contains delete)."""
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_configs(cls, configs: Mapping[str, str | None], *, strict: bool = False,
                     defaults: LogConfig | None = None) -> LogConfig:
        """Build from Kafka-named string configs; None values mean the default (`defaults`, e.g. the
        broker's `log.*` configs, else Kafka's). Names LogConfig does not model are ignored (other
        parts may use them) unless `strict`."""
        kwargs: dict[str, Any] = {}
        for name, value in configs.items():
            if name not in KAFKA_NAMES:
                if strict:
                    raise ValueError(f"Unknown topic config name: {name}")
                continue
            if value is not None:
                kwargs[KAFKA_NAMES[name]] = validate(name, value)
        return replace(defaults, **kwargs) if defaults is not None else cls(**kwargs)

    def to_configs(self) -> dict[str, str]:
        out = {}
        for kname, fname in KAFKA_NAMES.items():
            v = getattr(self, fname)
            out[kname] = str(v).lower() if isinstance(v, bool) else str(v)
        return out


KAFKA_NAMES: dict[str, str] = {f.name.replace("_", "."): f.name for f in fields(LogConfig)}
DEFAULTS: dict[str, str] = LogConfig().to_configs()

# Topic config -> the broker config it defaults from (Kafka's LogConfig synonyms); configs of our
# own (enable.ordered.delivery, KIP-253) have none.
BROKER_SYNONYMS = {
    "cleanup.policy": "log.cleanup.policy", "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.insync.replicas": "min.insync.replicas", "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms", "segment.bytes": "log.segment.bytes",
}
_RETENTION_UNITS = (("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                    ("log.retention.hours", 3_600_000))
# The broker configs (ClusterConfig.extra) that only give topics their defaults.
BROKER_CONFIGS = frozenset(BROKER_SYNONYMS.values()) | {n for n, _ in _RETENTION_UNITS}


def broker_defaults(broker_configs: Mapping[str, str]) -> LogConfig:
    """The topic defaults a broker's configs give (a topic config not set takes its broker synonym;
    retention in ms, else minutes, else hours, as Kafka). ValueError for an invalid value."""
    configs = {topic_name: broker_configs[name] for topic_name, name in BROKER_SYNONYMS.items()
               if name in broker_configs}
    for name, unit in _RETENTION_UNITS:
        if name in broker_configs:
            try:
                ms = int(broker_configs[name]) * unit
            except ValueError:
                raise _invalid(name, broker_configs[name], "Not a number of type LONG") from None
            # Any negative value means no time limit (Kafka: log.retention.hours=-1 is -1 ms).
            configs["retention.ms"] = str(max(ms, -1))
            break
    return LogConfig.from_configs(configs)


def _invalid(name: str, value: str, why: str) -> ValueError:
    return ValueError(f"Invalid value {value} for configuration {name}: {why}")


def _boolean(name: str, value: str) -> bool:
    if value.strip().lower() not in ("true", "false"):
        raise _invalid(name, value, "Expected value to be either true or false")
    return value.strip().lower() == "true"


def _number(kind: str, lo: int, hi: int, at_least: int | None) -> Callable[[str, str], int]:
    def check(name: str, value: str) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise _invalid(name, value, f"Not a number of type {kind}") from None
        if not lo <= number <= hi:
            raise _invalid(name, value, f"Not a number of type {kind}")
        if at_least is not None and number < at_least:
            raise _invalid(name, value, f"Value must be at least {at_least}")
        return number
    return check


def _timestamp_type(name: str, value: str) -> str:
    if value not in TIMESTAMP_TYPES:
        raise _invalid(name, value, f"String must be one of: {', '.join(TIMESTAMP_TYPES)}")
    return value


def _cleanup_policy(name: str, value: str) -> str:
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    if not items or any(v not in CLEANUP_POLICIES for v in items):
        raise _invalid(name, value, f"String must be one of: {', '.join(CLEANUP_POLICIES)}")
    return ",".join(sorted(set(items)))


def _throttled_replicas(name: str, value: str) -> str:
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    if items == ["*"] or all(len(i.split(":")) == 2 and all(
            x.strip().isdigit() for x in i.split(":")) for i in items):
        return ",".join(items)
    raise _invalid(name, value, "Must be the literal '*' or a list of replicas in the following "
                   "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


VALIDATORS: dict[str, Callable[[str, str], Any]] = {
    "max.message.bytes": _number("INT", INT32_MIN, INT32_MAX, 0),
    "retention.ms": _number("LONG", INT64_MIN, INT64_MAX, -1),
    "retention.bytes": _number("LONG", INT64_MIN, INT64_MAX, None),
    "message.timestamp.type": _timestamp_type,
    "cleanup.policy": _cleanup_policy,
    "min.insync.replicas": _number("INT", INT32_MIN, INT32_MAX, 1),
    "segment.bytes": _number("INT", INT32_MIN, INT32_MAX, 14),   # LegacyRecord.RECORD_OVERHEAD_V0
    "enable.ordered.delivery": _boolean,
    "leader.replication.throttled.replicas": _throttled_replicas,
    "follower.replication.throttled.replicas": _throttled_replicas,
}
assert VALIDATORS.keys() == KAFKA_NAMES.keys()


def validate(name: str, value: str) -> Any:
    """The parsed value of Kafka-named config `name`, or ValueError with Kafka's message."""
    check = VALIDATORS.get(name)
    if check is None:
        raise ValueError(f"Unknown topic config name: {name}")
    return check(name, value)
