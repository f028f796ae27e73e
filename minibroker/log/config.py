"""Topic-level log configuration (Kafka 4.x's LogConfig / TopicConfig), names mapped dots -> underscores.

`TOPIC_CONFIGS` is every topic config Kafka 4.x defines: type, default, broker synonyms (in
Kafka's ServerTopicConfigSynonyms order) and a one-line doc. `DEFAULTS` (name -> default string)
and `validate(name, value)` serve DescribeConfigs, CreateTopics and AlterConfigs; errors are
ValueErrors with Kafka's ConfigException wording, e.g.
"Invalid value abc for configuration retention.ms: Not a number of type LONG".

`LogConfig` models the configs that mean something to a log (retention, compaction,
compression, size and timestamp checks; flush.* and index.interval.bytes for logs on disk,
serve --data-dir); the others (preallocate, remote storage, segment.index.bytes, ...) are
accepted, stored and described, and have no effect. `message.format.version` (removed in Kafka 4.0, still
sent by librdkafka's tests) is accepted and ignored, not described.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Mapping, NamedTuple

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
CLEANUP_POLICIES = ("compact", "delete")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
# Accepted for older clients' sake and ignored (Kafka 4.0 dropped it with the v0/v1 formats).
IGNORED_CONFIGS = frozenset({"message.format.version"})


@dataclass(frozen=True)
class LogConfig:
    max_message_bytes: int = 1048588
    retention_ms: int = 604800000           # -1: no time limit
    retention_bytes: int = -1               # -1: no size limit
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = INT64_MAX
    message_timestamp_after_max_ms: int = 3600000      # Kafka 4.0 (KIP-1030): one hour
    cleanup_policy: str = "delete"          # "delete", "compact" or "compact,delete"
    min_insync_replicas: int = 1
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = INT64_MAX
    min_cleanable_dirty_ratio: float = 0.5
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    enable_ordered_delivery: bool = True    # KIP-253's topic config
    # Logs on disk (serve --data-dir, log/disk_log.py): fsync after this many messages / ms
    # (Kafka's defaults: never, the OS writes back), an offset index entry per this many bytes.
    flush_messages: int = INT64_MAX
    flush_ms: int = INT64_MAX
    index_interval_bytes: int = 4096
    # Replication throttling (kafka-reassign-partitions --throttle): "partition:broker,..." or "*",
    # the replicas whose leader-side answers / follower-side fetches the broker's
    # {leader,follower}.replication.throttled.rate limit (minibroker.broker.throttle).
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    # The configs set that LogConfig does not model, as sorted (name, value) pairs (described only).
    others: tuple[tuple[str, str], ...] = ()
    # CreateTime bounds are enforced once a message.timestamp.{before,after}.max.ms is set (on the
    # topic or the broker): a seeded cluster's clock is not its clients', so Kafka 4.0's one-hour
    # default would refuse every client's records there.
    timestamp_bounds_set: bool = False

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def deletes(self) -> bool:
        """Whether time/size retention applies (cleanup.policy contains delete)."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @classmethod
    def from_configs(cls, configs: Mapping[str, str | None], *, strict: bool = False,
                     defaults: LogConfig | None = None) -> LogConfig:
        """Build from Kafka-named string configs; None values mean the default (`defaults`, e.g. the
        broker's `log.*` configs, else Kafka's). Names that are no topic config are ignored (other
        parts may use them) unless `strict`."""
        kwargs: dict[str, Any] = {}
        others = dict(defaults.others) if defaults is not None else {}
        for name, value in configs.items():
            if name not in TOPIC_CONFIGS:
                if strict and name not in IGNORED_CONFIGS:
                    raise ValueError(f"Unknown topic config name: {name}")
                continue
            if value is None:
                continue
            parsed = validate(name, value)
            if name in _TIMESTAMP_BOUNDS:
                kwargs["timestamp_bounds_set"] = True
            if name in KAFKA_NAMES:
                kwargs[KAFKA_NAMES[name]] = parsed
            elif str(value) != DEFAULTS[name]:
                others[name] = str(value)
            else:
                others.pop(name, None)
        kwargs["others"] = tuple(sorted(others.items()))
        return replace(defaults, **kwargs) if defaults is not None else cls(**kwargs)

    def to_configs(self) -> dict[str, str]:
        """Every topic config's value under this LogConfig (DEFAULTS for the ones not modelled)."""
        out = dict(DEFAULTS)
        for kname, fname in KAFKA_NAMES.items():
            out[kname] = _string(getattr(self, fname))
        out.update(self.others)
        return out


def _string(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


KAFKA_NAMES: dict[str, str] = {f.name.replace("_", "."): f.name for f in fields(LogConfig)
                               if f.name not in ("others", "timestamp_bounds_set")}
_TIMESTAMP_BOUNDS = ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms")


def _invalid(name: str, value: str, why: str) -> ValueError:
    return ValueError(f"Invalid value {value} for configuration {name}: {why}")


def _boolean(name: str, value: str) -> bool:
    if str(value).strip().lower() not in ("true", "false"):
        raise _invalid(name, value, "Expected value to be either true or false")
    return str(value).strip().lower() == "true"


def _number(kind: str, at_least: int | None = None, at_most: int | None = None,
            or_value: int | None = None) -> Callable[[str, str], int]:
    lo, hi = (INT32_MIN, INT32_MAX) if kind == "INT" else (INT64_MIN, INT64_MAX)

    def check(name: str, value: str) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise _invalid(name, value, f"Not a number of type {kind}") from None
        if not lo <= number <= hi:
            raise _invalid(name, value, f"Not a number of type {kind}")
        if number == or_value:
            return number
        if at_least is not None and number < at_least:
            why = (f"Value must be at least {at_least}" if at_most is None
                   else f"Value must be no less than {at_least}")
            raise _invalid(name, value, why)
        if at_most is not None and number > at_most:
            raise _invalid(name, value, f"Value must be no more than {at_most}")
        return number
    return check


def _ratio(name: str, value: str) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        raise _invalid(name, value, "Not a number of type DOUBLE") from None
    if not 0 <= number <= 1:
        raise _invalid(name, value, "Value must be no more than 1")
    return number


def _one_of(choices: tuple[str, ...]) -> Callable[[str, str], str]:
    def check(name: str, value: str) -> str:
        if value not in choices:
            raise _invalid(name, value, f"String must be one of: {', '.join(choices)}")
        return value
    return check


def _cleanup_policy(name: str, value: str) -> str:
    items = [v.strip().lower() for v in str(value).split(",") if v.strip()]
    if not items or any(v not in CLEANUP_POLICIES for v in items):
        raise _invalid(name, value, f"String must be one of: {', '.join(CLEANUP_POLICIES)}")
    return ",".join(sorted(set(items)))


def _throttled_replicas(name: str, value: str) -> str:
    """"" , "*" or "partition:broker,..." (Kafka's ThrottledReplicaListValidator), normalised."""
    items = [v.strip() for v in str(value).split(",") if v.strip()]
    if items == ["*"] or all(len(i.split(":")) == 2 and all(
            x.strip().isdigit() for x in i.split(":")) for i in items):
        return ",".join(items)
    raise _invalid(name, value, "Must be the literal '*' or a list of replicas in the following "
                   "format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _any(name: str, value: str) -> str:
    return str(value)


class TopicConfigDef(NamedTuple):
    type: str               # Kafka's ConfigDef.Type name
    default: str
    check: Callable[[str, str], Any]
    synonyms: tuple[str, ...]   # broker configs giving the default, first set wins
    doc: str


def _d(type_: str, default: Any, check: Callable[[str, str], Any], synonyms: tuple[str, ...] | str = (),
       doc: str = "") -> TopicConfigDef:
    syn = (synonyms,) if isinstance(synonyms, str) else synonyms
    return TopicConfigDef(type_, _string(default), check, syn, doc)


_LONG0, _LONG1 = _number("LONG", 0), _number("LONG", 1)
# Every Kafka 4.x topic config (LogConfig.CONFIG), plus enable.ordered.delivery (KIP-253, ours).
TOPIC_CONFIGS: dict[str, TopicConfigDef] = {
    "cleanup.policy": _d("LIST", "delete", _cleanup_policy, "log.cleanup.policy",
                         "The retention policy of old log segments: delete, compact or both."),
    "compression.gzip.level": _d("INT", -1, _number("INT", 1, 9, -1), "compression.gzip.level",
                                 "The compression level to use if compression.type is gzip."),
    "compression.lz4.level": _d("INT", 9, _number("INT", 1, 17), "compression.lz4.level",
                                "The compression level to use if compression.type is lz4."),
    "compression.type": _d("STRING", "producer", _one_of(COMPRESSION_TYPES), "compression.type",
                           "The final compression type of the topic; producer keeps the "
                           "producer's codec."),
    "compression.zstd.level": _d("INT", 3, _number("INT", -131072, 22), "compression.zstd.level",
                                 "The compression level to use if compression.type is zstd."),
    "delete.retention.ms": _d("LONG", 86400000, _LONG0, "log.cleaner.delete.retention.ms",
                              "How long delete tombstones are kept on compacted topics."),
    "enable.ordered.delivery": _d("BOOLEAN", True, _boolean, (),
                                  "KIP-253: keep per-key order when partitions are added."),
    "file.delete.delay.ms": _d("LONG", 60000, _LONG0, "log.segment.delete.delay.ms",
                               "The time to wait before deleting a file from the filesystem."),
    "flush.messages": _d("LONG", INT64_MAX, _LONG1, "log.flush.interval.messages",
                         "Messages written between forced fsyncs (logs on disk: serve --data-dir)."),
    "flush.ms": _d("LONG", INT64_MAX, _LONG0,
                   ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
                   "Time between forced fsyncs (logs on disk: serve --data-dir)."),
    "follower.replication.throttled.replicas": _d(
        "LIST", "", _throttled_replicas, (), "Replicas whose log replication is throttled on the follower side."),
    "index.interval.bytes": _d("INT", 4096, _number("INT", 0), "log.index.interval.bytes",
                               "How often an offset index entry is added."),
    "leader.replication.throttled.replicas": _d(
        "LIST", "", _throttled_replicas, (), "Replicas whose log replication is throttled on the leader side."),
    "local.retention.bytes": _d("LONG", -2, _number("LONG", -2), "log.local.retention.bytes",
                                "Local bytes kept before deletion with tiered storage; -2: retention.bytes."),
    "local.retention.ms": _d("LONG", -2, _number("LONG", -2), "log.local.retention.ms",
                             "Local time kept before deletion with tiered storage; -2: retention.ms."),
    "max.compaction.lag.ms": _d("LONG", INT64_MAX, _LONG1, "log.cleaner.max.compaction.lag.ms",
                                "The longest a message stays ineligible for compaction."),
    "max.message.bytes": _d("INT", 1048588, _number("INT", 0), "message.max.bytes",
                            "The largest record batch size allowed (after compression)."),
    "message.downconversion.enable": _d("BOOLEAN", True, _boolean, (),
                                        "Deprecated no-op since Kafka 4.0."),
    "message.timestamp.after.max.ms": _d("LONG", 3600000, _LONG0,
                                         "log.message.timestamp.after.max.ms",
                                         "How far a CreateTime timestamp may be ahead of the broker."),
    "message.timestamp.before.max.ms": _d("LONG", INT64_MAX, _LONG0,
                                          "log.message.timestamp.before.max.ms",
                                          "How far a CreateTime timestamp may be behind the broker."),
    "message.timestamp.type": _d("STRING", "CreateTime", _one_of(TIMESTAMP_TYPES),
                                 "log.message.timestamp.type",
                                 "Whether records keep their create time or get the append time."),
    "min.cleanable.dirty.ratio": _d("DOUBLE", 0.5, _ratio, "log.cleaner.min.cleanable.ratio",
                                    "The dirty share of the log above which it is compacted."),
    "min.compaction.lag.ms": _d("LONG", 0, _LONG0, "log.cleaner.min.compaction.lag.ms",
                                "The least time a message stays uncompacted."),
    "min.insync.replicas": _d("INT", 1, _number("INT", 1), "min.insync.replicas",
                              "The fewest in-sync replicas an acks=all write needs."),
    "preallocate": _d("BOOLEAN", False, _boolean, "log.preallocate",
                      "Preallocate segment files (no files here)."),
    "remote.log.copy.disable": _d("BOOLEAN", False, _boolean, (),
                                  "Stop copying segments to tiered storage."),
    "remote.log.delete.on.disable": _d("BOOLEAN", False, _boolean, (),
                                       "Delete tiered data when tiering is disabled."),
    "remote.storage.enable": _d("BOOLEAN", False, _boolean, (), "Tiered storage for the topic."),
    "retention.bytes": _d("LONG", -1, _number("LONG"), "log.retention.bytes",
                          "The largest size a partition's log grows to before old data is deleted."),
    "retention.ms": _d("LONG", 604800000, _number("LONG", -1),
                       ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                       "How long data is kept before deletion; -1: no time limit."),
    "segment.bytes": _d("INT", 1073741824, _number("INT", 14), "log.segment.bytes",
                        "The segment file size (--data-dir; in memory each batch acts as a segment)."),
    "segment.index.bytes": _d("INT", 10485760, _number("INT", 4), "log.index.size.max.bytes",
                              "The size of the offset index (no index files here)."),
    "segment.jitter.ms": _d("LONG", 0, _LONG0, ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                            "Jitter subtracted from segment.ms."),
    "segment.ms": _d("LONG", 604800000, _LONG1, ("log.roll.ms", "log.roll.hours"),
                     "How long before the active segment rolls (and may be compacted)."),
    "unclean.leader.election.enable": _d("BOOLEAN", False, _boolean,
                                         "unclean.leader.election.enable",
                                         "Let an out-of-sync replica become leader as a last resort."),
}
assert set(KAFKA_NAMES) <= set(TOPIC_CONFIGS)
DEFAULTS: dict[str, str] = {name: d.default for name, d in TOPIC_CONFIGS.items()}
VALIDATORS: dict[str, Callable[[str, str], Any]] = {name: d.check for name, d in TOPIC_CONFIGS.items()}
# Topic config -> the first broker config it defaults from (Kafka's TOPIC_CONFIG_SYNONYMS).
BROKER_SYNONYMS = {name: d.synonyms[0] for name, d in TOPIC_CONFIGS.items() if d.synonyms}
# Broker synonyms in other units than the topic config's ms (Kafka's ConfigSynonym converters).
_UNITS = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000,
          "log.roll.hours": 3_600_000, "log.roll.jitter.hours": 3_600_000}
# The broker configs (ClusterConfig.extra) that only give topics their defaults.
BROKER_CONFIGS = frozenset(s for d in TOPIC_CONFIGS.values() for s in d.synonyms)


def broker_value(topic_name: str, broker_configs: Mapping[str, str]) -> tuple[str, str] | None:
    """(broker config name, topic value) of the first synonym of `topic_name` set among
    `broker_configs`, converted to the topic's unit; None when none is set."""
    for name in TOPIC_CONFIGS[topic_name].synonyms:
        if name in broker_configs:
            raw = broker_configs[name]
            if name in _UNITS:
                try:
                    ms = int(raw) * _UNITS[name]
                except ValueError:
                    raise _invalid(name, raw, "Not a number of type LONG") from None
                # Any negative value means no limit (Kafka: log.retention.hours=-1 is -1 ms).
                return name, str(max(ms, -1))
            return name, raw
    return None


def broker_defaults(broker_configs: Mapping[str, str]) -> LogConfig:
    """The topic defaults a broker's configs give (a topic config not set takes its broker synonym,
    in Kafka's order: retention in ms, else minutes, else hours). ValueError for an invalid value."""
    configs = {}
    for topic_name, definition in TOPIC_CONFIGS.items():
        found = broker_value(topic_name, broker_configs)
        if found is not None:
            definition.check(found[0], found[1])       # errors name the broker config
            configs[topic_name] = found[1]
    return LogConfig.from_configs(configs)


def validate(name: str, value: str) -> Any:
    """The parsed value of Kafka-named config `name`, or ValueError with Kafka's message."""
    if name in IGNORED_CONFIGS:
        return str(value)
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise ValueError(f"Unknown topic config name: {name}")
    return definition.check(name, value)


def validate_all(configs: Mapping[str, str | None]) -> None:
    """Cross-config checks Kafka makes (LogConfig.validateValues)."""
    lag_min = configs.get("min.compaction.lag.ms") or DEFAULTS["min.compaction.lag.ms"]
    lag_max = configs.get("max.compaction.lag.ms") or DEFAULTS["max.compaction.lag.ms"]
    if int(lag_min) > int(lag_max):
        raise ValueError(f"conflict topic config setting min.compaction.lag.ms ({lag_min}) > "
                         f"max.compaction.lag.ms ({lag_max})")
