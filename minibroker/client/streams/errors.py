"""Errors a streams app ends in (Kafka Streams' AssignorError codes and exceptions)."""
from __future__ import annotations

NONE = 0
INCOMPLETE_SOURCE_TOPIC_METADATA = 1     # AssignorError.INCOMPLETE_SOURCE_TOPIC_METADATA
ASSIGNMENT_ERROR = 3                     # AssignorError.ASSIGNMENT_ERROR


class StreamsError(Exception):
    code = ASSIGNMENT_ERROR

    def __init__(self, *args) -> None:
        if args and isinstance(args[0], int):
            self.code, args = args[0], args[1:]
        super().__init__(*args)


class MissingSourceTopicError(StreamsError):
    """Source topics are missing or changed width in a way the app cannot follow."""
    code = INCOMPLETE_SOURCE_TOPIC_METADATA


class AssignmentError(StreamsError):
    """The topology cannot be assigned as it stands (e.g. an over-partitioned internal topic)."""
    code = ASSIGNMENT_ERROR
