"""Metadata-log and coordinator record classes (kafka-python ``ApiData``), built from ``schemas/records``.

Metadata-log records (the controller's log; Kafka's KRaft records plus our KIP-253 fields) are
framed like KRaft's: unsigned varints ``frame_version`` (1), ``api_key`` (record type) and
``version``, then the body.  ``encode_metadata_record`` / ``decode_metadata_record``.

Coordinator records (``__consumer_offsets``-style) are a key and a value, each an int16 prefix and a
body: the key's prefix is its record type, the value's prefix is its own version, and a ``None``
value is a tombstone.  ``encode_coordinator_key`` / ``encode_coordinator_value`` /
``decode_coordinator_record``.

Each class's ``json`` keeps Kafka's record type as ``apiKey`` and its role as ``kind``
(``metadata``, ``coordinator-key``, ``coordinator-value``).
"""
from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from kafka.protocol.schemas.fields.codecs import Int16, UnsignedVarInt32

from minibroker.protocol.schemas import loading, package, share_nested_classes

__all__ = [
    # metadata log
    "RegisterBrokerRecord", "TopicRecord", "PartitionRecord", "ConfigRecord", "PartitionChangeRecord",
    "FenceBrokerRecord", "UnfenceBrokerRecord", "RemoveTopicRecord", "TopicPartitionCountRecord",
    "ProducerIdsRecord", "RemovePartitionRecord", "PartitionReassignmentRecord",
    "AccessControlEntryRecord", "RemoveAccessControlEntryRecord",
    "UserScramCredentialRecord", "RemoveUserScramCredentialRecord",
    # coordinator
    "OffsetCommitKey", "OffsetCommitValue", "GroupMetadataKey", "GroupMetadataValue",
    "ConsumerGroupMetadataKey", "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataKey", "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupMemberMetadataKey", "ConsumerGroupMemberMetadataValue",
    "ConsumerGroupTargetAssignmentMetadataKey", "ConsumerGroupTargetAssignmentMetadataValue",
    "ConsumerGroupTargetAssignmentMemberKey", "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupCurrentMemberAssignmentKey", "ConsumerGroupCurrentMemberAssignmentValue",
    # tables and codecs
    "METADATA_RECORDS", "COORDINATOR_KEYS", "COORDINATOR_VALUES", "RECORD_CLASSES",
    "encode_metadata_record", "decode_metadata_record",
    "encode_coordinator_key", "encode_coordinator_value", "decode_coordinator_record",
]

if TYPE_CHECKING:
    from kafka.protocol.api_data import ApiData as _UntypedApiData

    # kafka-python ships no types, so its ApiData is Any, which --strict will not let a class
    # extend; this face is still Any to every use, and names the class keyword it takes.
    class ApiData(_UntypedApiData):  # type: ignore[misc]
        def __init_subclass__(cls, *, load_json: str | None = None, **kwargs: Any) -> None: ...
else:
    from kafka.protocol.api_data import ApiData

_RECORDS = package("records")

with loading():
    # --- metadata log ---------------------------------------------------------------------------------
    class RegisterBrokerRecord(ApiData, load_json=_RECORDS): pass
    class TopicRecord(ApiData, load_json=_RECORDS): pass
    class PartitionRecord(ApiData, load_json=_RECORDS): pass
    class ConfigRecord(ApiData, load_json=_RECORDS): pass
    class PartitionChangeRecord(ApiData, load_json=_RECORDS): pass
    class FenceBrokerRecord(ApiData, load_json=_RECORDS): pass
    class UnfenceBrokerRecord(ApiData, load_json=_RECORDS): pass
    class RemoveTopicRecord(ApiData, load_json=_RECORDS): pass
    class TopicPartitionCountRecord(ApiData, load_json=_RECORDS): pass
    class ProducerIdsRecord(ApiData, load_json=_RECORDS): pass
    class RemovePartitionRecord(ApiData, load_json=_RECORDS): pass
    class PartitionReassignmentRecord(ApiData, load_json=_RECORDS): pass
    class AccessControlEntryRecord(ApiData, load_json=_RECORDS): pass
    class RemoveAccessControlEntryRecord(ApiData, load_json=_RECORDS): pass
    class UserScramCredentialRecord(ApiData, load_json=_RECORDS): pass
    class RemoveUserScramCredentialRecord(ApiData, load_json=_RECORDS): pass

    # --- coordinator ----------------------------------------------------------------------------------
    class OffsetCommitKey(ApiData, load_json=_RECORDS): pass
    class OffsetCommitValue(ApiData, load_json=_RECORDS): pass
    class GroupMetadataKey(ApiData, load_json=_RECORDS): pass
    class GroupMetadataValue(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupMetadataKey(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupMetadataValue(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupPartitionMetadataKey(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupPartitionMetadataValue(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupMemberMetadataKey(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupMemberMetadataValue(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupTargetAssignmentMetadataKey(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupTargetAssignmentMetadataValue(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupTargetAssignmentMemberKey(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupTargetAssignmentMemberValue(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupCurrentMemberAssignmentKey(ApiData, load_json=_RECORDS): pass
    class ConsumerGroupCurrentMemberAssignmentValue(ApiData, load_json=_RECORDS): pass


def _by_api_key(kind: str) -> dict[int, type[ApiData]]:
    table: dict[int, type[ApiData]] = {}
    for cls in RECORD_CLASSES:
        if cls.json["kind"] == kind:
            key = cls.json["apiKey"]
            assert key not in table, f"two {kind} records with apiKey {key}"
            table[key] = cls
    return table


RECORD_CLASSES: tuple[type[ApiData], ...] = tuple(
    obj for name, obj in list(globals().items())
    if isinstance(obj, type) and issubclass(obj, ApiData) and obj is not ApiData
)
for _cls in RECORD_CLASSES:
    share_nested_classes(_cls)
del _cls

#: metadata record type -> class
METADATA_RECORDS: dict[int, type[ApiData]] = _by_api_key("metadata")
#: coordinator key type -> key class (type 0 is the legacy offset commit key, same fields as type 1)
COORDINATOR_KEYS: dict[int, type[ApiData]] = {0: OffsetCommitKey, **_by_api_key("coordinator-key")}
#: coordinator key type -> value class
COORDINATOR_VALUES: dict[int, type[ApiData]] = {0: OffsetCommitValue, **_by_api_key("coordinator-value")}

_METADATA_FRAME_VERSION = 1


def _body(record: ApiData, version: int) -> bytes:
    body: bytes = record.encode(version=version, header=False)
    return body


def _decode_body(cls: type[ApiData], data: io.BytesIO, version: int) -> ApiData:
    if not 0 <= version <= cls.max_version:
        raise ValueError(f"{cls.__name__} has no version {version}")
    record: ApiData = cls.decode(data, version=version, header=False)
    return record


def _expect_end(data: io.BytesIO, what: str) -> None:
    if data.read(1):
        raise ValueError(f"trailing bytes after {what}")


def encode_metadata_record(record: ApiData, version: int | None = None) -> bytes:
    """KRaft framing: varint frame version, varint record type, varint version, body."""
    version = record.version if version is None else version
    if version is None:
        raise ValueError("record version required")
    return b"".join((
        UnsignedVarInt32.encode(_METADATA_FRAME_VERSION),
        UnsignedVarInt32.encode(record.json["apiKey"]),
        UnsignedVarInt32.encode(version),
        _body(record, version),
    ))


def decode_metadata_record(buf: bytes) -> ApiData:
    data = io.BytesIO(bytes(buf))
    frame_version = UnsignedVarInt32.decode(data)
    if frame_version != _METADATA_FRAME_VERSION:
        raise ValueError(f"unknown metadata record frame version {frame_version}")
    api_key = UnsignedVarInt32.decode(data)
    version = UnsignedVarInt32.decode(data)
    cls = METADATA_RECORDS.get(api_key)
    if cls is None:
        raise ValueError(f"unknown metadata record type {api_key}")
    record = _decode_body(cls, data, version)
    _expect_end(data, cls.__name__)
    return record


def encode_coordinator_key(key: ApiData, record_type: int | None = None) -> bytes:
    """int16 record type + key body (key schema version 0)."""
    record_type = key.json["apiKey"] if record_type is None else record_type
    if COORDINATOR_KEYS.get(record_type) is not type(key):
        raise ValueError(f"{type(key).__name__} is not the key of record type {record_type}")
    prefix: bytes = Int16.encode(record_type)
    return prefix + _body(key, 0)


def encode_coordinator_value(value: ApiData | None, version: int | None = None) -> bytes | None:
    """int16 value version + value body; ``None`` (a tombstone) stays ``None``."""
    if value is None:
        return None
    version = value.version if version is None else version
    if version is None:
        raise ValueError("value version required")
    prefix: bytes = Int16.encode(version)
    return prefix + _body(value, version)


def decode_coordinator_record(key: bytes, value: bytes | None) -> tuple[ApiData, ApiData | None]:
    """Decode a coordinator record; the value is ``None`` for a tombstone."""
    kdata = io.BytesIO(bytes(key))
    record_type = Int16.decode(kdata)
    key_cls = COORDINATOR_KEYS.get(record_type)
    if key_cls is None:
        raise ValueError(f"unknown coordinator record type {record_type}")
    decoded_key = _decode_body(key_cls, kdata, 0)
    _expect_end(kdata, key_cls.__name__)
    if value is None:
        return decoded_key, None
    vdata = io.BytesIO(bytes(value))
    version = Int16.decode(vdata)
    value_cls = COORDINATOR_VALUES[record_type]
    decoded_value = _decode_body(value_cls, vdata, version)
    _expect_end(vdata, value_cls.__name__)
    return decoded_key, decoded_value
