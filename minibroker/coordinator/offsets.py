"""__consumer_offsets: its name, and which of its partitions owns a group (Kafka's
GroupCoordinator.partitionFor: abs(groupId.hashCode) % partitions, with Java's String.hashCode).

The records written to it are minibroker.coordinator.group.classic_group_records (offsets and
classic groups) and minibroker.coordinator.group.consumer_group_records (KIP-848 groups).
"""
from __future__ import annotations

import struct

OFFSETS_TOPIC = "__consumer_offsets"
INT32_MIN = -2**31


def java_string_hashcode(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, as a signed int32."""
    data = s.encode("utf-16-be")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 instead of staying negative."""
    return 0 if n == INT32_MIN else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions
