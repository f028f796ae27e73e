"""Request/response classes for the messages kafka-python does not ship, built from ``schemas/``.

* ``schemas/message``: LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6) in their last Kafka 3.x
  shapes plus KIP-253 tagged fields; ConsumerGroupHeartbeat (68) and ConsumerGroupDescribe (69);
  and the seeds' new APIs under private keys 1000-1003, our FaultControl under 1004 (see ``PrivateApiKey``).
* ``schemas/extensions``: stock Produce/Fetch requests and Metadata response with KIP-253 tagged
  fields (tags >= 10000), as ``ProduceRequestKip253``, ``FetchRequestKip253`` and
  ``MetadataResponseKip253``.  Their JSON files list only our additions; they are merged here into
  kafka-python's own definitions, so the stock fields stay exactly kafka-python's.

Defining an ``ApiMessage`` response class registers it in kafka-python's process-wide
``ResponseClassRegistry`` under its api key.  That is harmless for keys kafka-python does not ship,
but the Kip253 variants would replace the stock Metadata entry and break kafka-python clients in
the same process, so each extended class is defined with the registry entry saved and restored.
"""
from __future__ import annotations

import copy
from contextlib import contextmanager
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Iterator

from kafka.protocol.api_header import ResponseClassRegistry

from minibroker.protocol.schemas import loading, package, share_nested_classes

if TYPE_CHECKING:
    from kafka.protocol.api_message import ApiMessage as _UntypedApiMessage
    from kafka.protocol.consumer import FetchRequest as _UntypedFetchRequest
    from kafka.protocol.metadata import MetadataResponse as _UntypedMetadataResponse
    from kafka.protocol.producer import ProduceRequest as _UntypedProduceRequest

    # kafka-python ships no types, so its classes are Any, which --strict will not let a class
    # extend; these faces are still Any to every use, and name the class keyword they take.
    class ApiMessage(_UntypedApiMessage):  # type: ignore[misc]
        def __init_subclass__(cls, *, load_json: str | None = None, **kwargs: Any) -> None: ...

    class ProduceRequest(_UntypedProduceRequest, ApiMessage): ...  # type: ignore[misc]
    class FetchRequest(_UntypedFetchRequest, ApiMessage): ...  # type: ignore[misc]
    class MetadataResponse(_UntypedMetadataResponse, ApiMessage): ...  # type: ignore[misc]
else:
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.metadata import MetadataResponse
    from kafka.protocol.producer import ProduceRequest

__all__ = [
    "PrivateApiKey",
    "LeaderAndIsrRequest", "LeaderAndIsrResponse",
    "StopReplicaRequest", "StopReplicaResponse",
    "UpdateMetadataRequest", "UpdateMetadataResponse",
    "ConsumerGroupHeartbeatRequest", "ConsumerGroupHeartbeatResponse",
    "ConsumerGroupDescribeRequest", "ConsumerGroupDescribeResponse",
    "ConsumerGroupPositionRequest", "ConsumerGroupPositionResponse",
    "PartitionLeaderEpochsForPartitionsRequest", "PartitionLeaderEpochsForPartitionsResponse",
    "AssignPartitionsRequest", "AssignPartitionsResponse",
    "PartitionAssignmentStatusRequest", "PartitionAssignmentStatusResponse",
    "FaultControlRequest", "FaultControlResponse",
    "ProduceRequestKip253", "FetchRequestKip253", "MetadataResponseKip253",
    "MESSAGE_CLASSES", "EXTENDED_CLASSES",
]

_MESSAGE = package("message")
_EXTENSIONS = package("extensions")


class PrivateApiKey(IntEnum):
    """API keys of the seeds' new APIs, far above Kafka's range (kafka-python's ``ApiKey`` lacks them)."""

    ConsumerGroupPosition = 1000
    PartitionLeaderEpochsForPartitions = 1001
    AssignPartitions = 1002
    PartitionAssignmentStatus = 1003
    FaultControl = 1004             # ours: faults on demand (`minibroker faults`)


# --- messages kafka-python does not ship -------------------------------------------------------

with loading():
    class LeaderAndIsrRequest(ApiMessage, load_json=_MESSAGE): pass
    class LeaderAndIsrResponse(ApiMessage, load_json=_MESSAGE): pass
    class StopReplicaRequest(ApiMessage, load_json=_MESSAGE): pass
    class StopReplicaResponse(ApiMessage, load_json=_MESSAGE): pass
    class UpdateMetadataRequest(ApiMessage, load_json=_MESSAGE): pass
    class UpdateMetadataResponse(ApiMessage, load_json=_MESSAGE): pass
    class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_MESSAGE): pass
    class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_MESSAGE): pass
    class ConsumerGroupDescribeRequest(ApiMessage, load_json=_MESSAGE): pass
    class ConsumerGroupDescribeResponse(ApiMessage, load_json=_MESSAGE): pass
    class ConsumerGroupPositionRequest(ApiMessage, load_json=_MESSAGE): pass
    class ConsumerGroupPositionResponse(ApiMessage, load_json=_MESSAGE): pass
    class PartitionLeaderEpochsForPartitionsRequest(ApiMessage, load_json=_MESSAGE): pass
    class PartitionLeaderEpochsForPartitionsResponse(ApiMessage, load_json=_MESSAGE): pass
    class AssignPartitionsRequest(ApiMessage, load_json=_MESSAGE): pass
    class AssignPartitionsResponse(ApiMessage, load_json=_MESSAGE): pass
    class PartitionAssignmentStatusRequest(ApiMessage, load_json=_MESSAGE): pass
    class PartitionAssignmentStatusResponse(ApiMessage, load_json=_MESSAGE): pass
    class FaultControlRequest(ApiMessage, load_json=_MESSAGE): pass
    class FaultControlResponse(ApiMessage, load_json=_MESSAGE): pass


MESSAGE_CLASSES: tuple[type[ApiMessage], ...] = (
    LeaderAndIsrRequest, LeaderAndIsrResponse,
    StopReplicaRequest, StopReplicaResponse,
    UpdateMetadataRequest, UpdateMetadataResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerGroupPositionRequest, ConsumerGroupPositionResponse,
    PartitionLeaderEpochsForPartitionsRequest, PartitionLeaderEpochsForPartitionsResponse,
    AssignPartitionsRequest, AssignPartitionsResponse,
    PartitionAssignmentStatusRequest, PartitionAssignmentStatusResponse,
    FaultControlRequest, FaultControlResponse,
)
for _cls in MESSAGE_CLASSES:
    share_nested_classes(_cls)


# --- stock messages extended with KIP-253 tagged fields ------------------------------------------

def _merge_fields(into: list[dict[str, Any]], extra: list[dict[str, Any]], where: str) -> None:
    for field in extra:
        same = next((f for f in into if f["name"] == field["name"]), None)
        if same is None:
            into.append(copy.deepcopy(field))  # a new field: appended, so tags stay ascending
        elif "fields" in field and "fields" in same:
            _merge_fields(same["fields"], field["fields"], f"{where}.{field['name']}")
        else:
            raise ValueError(f"overlay field {where}.{field['name']} already exists in the stock schema")


def _overlay(stock: type[ApiMessage], overlay: dict[str, Any]) -> dict[str, Any]:
    """kafka-python's (already json-patched) definition of ``stock`` plus the overlay's fields."""
    if overlay.get("extends") != stock.__name__ or overlay["apiKey"] != stock.API_KEY:
        raise ValueError(f"{overlay['name']} does not extend {stock.__name__}")
    merged: dict[str, Any] = copy.deepcopy(stock._json)
    merged.pop("license", None)
    merged.pop("doc", None)
    merged["name"] = overlay["name"]
    if "license" in overlay:
        merged["license"] = overlay["license"]
    _merge_fields(merged["fields"], overlay["fields"], overlay["name"])
    return merged


@contextmanager
def _registry_untouched(api_key: int) -> Iterator[None]:
    """Keep kafka-python's process-wide response class for ``api_key`` as it was."""
    registry = ResponseClassRegistry._response_class_registry
    had = api_key in registry
    saved = registry.get(api_key)
    try:
        yield
    finally:
        if had:
            registry[api_key] = saved
        else:
            registry.pop(api_key, None)


with loading():
    class ProduceRequestKip253(ProduceRequest, load_json=_EXTENSIONS):
        """ProduceRequest whose topics carry ``undeleted_partition_count`` (tag 10000, v9+, default -1)."""

        json_patch = classmethod(lambda cls, json: _overlay(ProduceRequest, json))

    class FetchRequestKip253(FetchRequest, load_json=_EXTENSIONS):
        """FetchRequest whose topics carry ``undeleted_partition_count`` (tag 10000, v12+, default -1)."""

        json_patch = classmethod(lambda cls, json: _overlay(FetchRequest, json))

    with _registry_untouched(MetadataResponse.API_KEY):
        class MetadataResponseKip253(MetadataResponse, load_json=_EXTENSIONS):
            """MetadataResponse with KIP-253 tags (v9+): ``max_partition_epoch``; per topic
            ``initial_partition_count`` and ``undeleted_partition_count``; per partition
            ``partition_epoch`` (all default -1, so without them the encoding is byte-identical
            to the stock response)."""

            json_patch = classmethod(lambda cls, json: _overlay(MetadataResponse, json))


EXTENDED_CLASSES: tuple[type[ApiMessage], ...] = (
    ProduceRequestKip253, FetchRequestKip253, MetadataResponseKip253,
)
for _cls in EXTENDED_CLASSES:
    share_nested_classes(_cls)
del _cls
