from __future__ import annotations

from dataclasses import replace

import pytest

from minibroker.log.config import DEFAULTS, LogConfig, broker_defaults, validate, validate_all


def test_defaults():
    # Kafka 4.x's LogConfig defaults (a selection; every name is checked against the list below).
    assert {k: DEFAULTS[k] for k in ("max.message.bytes", "retention.ms", "retention.bytes",
                                     "delete.retention.ms", "min.cleanable.dirty.ratio",
                                     "message.timestamp.after.max.ms", "compression.type",
                                     "segment.index.bytes", "local.retention.ms")} == {
        "max.message.bytes": "1048588", "retention.ms": "604800000", "retention.bytes": "-1",
        "delete.retention.ms": "86400000", "min.cleanable.dirty.ratio": "0.5",
        "message.timestamp.after.max.ms": "3600000", "compression.type": "producer",
        "segment.index.bytes": "10485760", "local.retention.ms": "-2"}
    assert sorted(DEFAULTS) == sorted(KAFKA_4_TOPIC_CONFIGS + ["enable.ordered.delivery"])
    assert replace(LogConfig.from_configs(DEFAULTS), timestamp_bounds_set=False) == LogConfig()
    assert LogConfig.from_configs({"message.timestamp.after.max.ms": "5"}).timestamp_bounds_set
    for name, value in DEFAULTS.items():
        assert validate(name, value) is not None, name


KAFKA_4_TOPIC_CONFIGS = [
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable",
    "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms",
    "segment.ms", "unclean.leader.election.enable"]


def test_unmodelled_configs_are_kept_and_message_format_version_ignored():
    c = LogConfig.from_configs({"segment.jitter.ms": "10", "preallocate": "false",
                                "message.format.version": "0.10.0"}, strict=True)
    assert c.others == (("segment.jitter.ms", "10"),)
    assert c.to_configs()["segment.jitter.ms"] == "10" and \
        "message.format.version" not in c.to_configs()
    assert LogConfig.from_configs({"flush.ms": "10"}).flush_ms == 10     # modelled: --data-dir
    assert broker_defaults({"log.roll.hours": "2", "log.flush.interval.ms": "5"}).to_configs()[
        "segment.ms"] == "7200000"


def test_from_configs():
    c = LogConfig.from_configs({"retention.ms": "-1", "message.timestamp.type": "LogAppendTime",
                                "cleanup.policy": "delete, compact", "compression.type": "zstd",
                                "retention.bytes": None, "no.such": "1"})
    assert c == LogConfig(retention_ms=-1, message_timestamp_type="LogAppendTime",
                          cleanup_policy="compact,delete", compression_type="zstd")
    assert c.log_append_time and c.deletes and not LogConfig(cleanup_policy="compact").deletes
    with pytest.raises(ValueError, match="Unknown topic config name: no.such"):
        LogConfig.from_configs({"no.such": "zstd"}, strict=True)


@pytest.mark.parametrize("name, value, message", [
    ("max.message.bytes", "abc", "Invalid value abc for configuration max.message.bytes: Not a number of type INT"),
    ("max.message.bytes", "4294967296", "Not a number of type INT"),
    ("max.message.bytes", "-1", "Value must be at least 0"),
    ("retention.ms", "-2", "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    ("min.insync.replicas", "0", "Value must be at least 1"),
    ("segment.bytes", "13", "Value must be at least 14"),
    ("message.timestamp.type", "Now", "String must be one of: CreateTime, LogAppendTime"),
    ("cleanup.policy", "shred", "String must be one of: compact, delete"),
    ("nope", "1", "Unknown topic config name: nope"),
    ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4, snappy, gzip"),
    ("compression.gzip.level", "0", "Value must be no less than 1"),
    ("compression.lz4.level", "18", "Value must be no more than 17"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
    ("delete.retention.ms", "-1", "Value must be at least 0"),
    ("segment.ms", "0", "Value must be at least 1"),
    ("leader.replication.throttled.replicas", "x", "Must be the literal"),
    ("preallocate", "maybe", "Expected value to be either true or false"),
])
def test_validation_messages(name, value, message):
    with pytest.raises(ValueError, match=message):
        validate(name, value)


def test_validate_parses():
    assert validate("retention.bytes", "-5") == -5
    assert validate("retention.ms", " 100 ") == 100


def test_compaction_lags_must_be_ordered():
    with pytest.raises(ValueError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        validate_all({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    validate_all({"min.compaction.lag.ms": "5"})
