from __future__ import annotations

import pytest

from minibroker.log.config import DEFAULTS, LogConfig, validate


def test_defaults():
    assert DEFAULTS == {"max.message.bytes": "1048588", "retention.ms": "604800000", "retention.bytes": "-1",
                        "message.timestamp.type": "CreateTime", "cleanup.policy": "delete",
                        "min.insync.replicas": "1", "segment.bytes": "1073741824",
                        "enable.ordered.delivery": "true",
                        # kafka-reassign-partitions --throttle (Kafka's default: none listed)
                        "leader.replication.throttled.replicas": "",
                        "follower.replication.throttled.replicas": ""}
    assert LogConfig.from_configs(DEFAULTS) == LogConfig()


def test_from_configs():
    c = LogConfig.from_configs({"retention.ms": "-1", "message.timestamp.type": "LogAppendTime",
                                "cleanup.policy": "delete, compact", "compression.type": "zstd",
                                "retention.bytes": None})
    assert c == LogConfig(retention_ms=-1, message_timestamp_type="LogAppendTime", cleanup_policy="compact,delete")
    assert c.log_append_time and c.deletes and not LogConfig(cleanup_policy="compact").deletes
    with pytest.raises(ValueError, match="Unknown topic config name: compression.type"):
        LogConfig.from_configs({"compression.type": "zstd"}, strict=True)


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
])
def test_validation_messages(name, value, message):
    with pytest.raises(ValueError, match=message):
        validate(name, value)


def test_validate_parses():
    assert validate("retention.bytes", "-5") == -5
    assert validate("retention.ms", " 100 ") == 100
