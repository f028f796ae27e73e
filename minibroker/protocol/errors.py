"""minibroker's own error codes, far outside Kafka's range (documented in schemas/README.md).

Kafka's codes come from ``kafka.errors`` (``Errors.X.errno``); this module adds the codes the seeds
ask for and never registers them in kafka-python's process-wide tables.
"""
from __future__ import annotations

import kafka.errors as Errors

__all__ = [
    "INVALID_PARTITION_METADATA",
    "PARTITION_REASSIGNMENT_IN_PROGRESS",
    "InvalidPartitionMetadataError",
    "PartitionReassignmentInProgressError",
    "OUR_ERRORS",
    "error_name",
    "for_code",
]

INVALID_PARTITION_METADATA = 10001
PARTITION_REASSIGNMENT_IN_PROGRESS = 10002

_InvalidMetadataBase = getattr(Errors, "InvalidMetadataError", Errors.KafkaError)


# kafka-python is untyped (its errors are Any to mypy) and the first base is picked at import.
class InvalidPartitionMetadataError(
        _InvalidMetadataBase, Errors.BrokerResponseError):  # type: ignore[misc, valid-type]
    """KIP-253: the producer's or consumer's undeleted_partition_count differs from the broker's.

    Retriable and an invalid-metadata error: refresh metadata and retry (consumers rejoin).
    """

    errno = INVALID_PARTITION_METADATA
    message = "INVALID_PARTITION_METADATA"
    description = (
        "The undeleted partition count in the request differs from the one the broker got in its"
        " latest LeaderAndIsr; refresh metadata and retry."
    )
    retriable = True
    invalid_metadata = True


class PartitionReassignmentInProgressError(Errors.BrokerResponseError):  # type: ignore[misc]
    """KIP-179 draft: the reassignment of this partition to this broker is still running."""

    errno = PARTITION_REASSIGNMENT_IN_PROGRESS
    message = "PARTITION_REASSIGNMENT_IN_PROGRESS"
    description = "A partition reassignment is still in progress."
    retriable = True


OUR_ERRORS: dict[int, type[Errors.BrokerResponseError]] = {
    INVALID_PARTITION_METADATA: InvalidPartitionMetadataError,
    PARTITION_REASSIGNMENT_IN_PROGRESS: PartitionReassignmentInProgressError,
}


def for_code(code: int) -> type[Errors.KafkaError]:
    """The exception class for an error code: ours first, then kafka-python's."""
    ours = OUR_ERRORS.get(code)
    if ours is not None:
        return ours
    theirs: type[Errors.KafkaError] = Errors.for_code(code)
    return theirs


def error_name(code: int) -> str:
    """``NONE`` for 0, our names, kafka-python's upper-case names (``UNKNOWN_TOPIC_OR_PARTITION``...),
    or ``UNKNOWN_<code>`` for a code nobody knows."""
    if code == 0:
        return "NONE"
    ours = OUR_ERRORS.get(code)
    if ours is not None:
        name: str = ours.message
        return name
    known = Errors.kafka_errors.get(code)
    if known is not None and known.message:
        name = known.message
        return name
    return f"UNKNOWN_{code}"
