"""The error codes the group coordinators (classic, KIP-848, offsets, positions) answer, by Kafka's
names, and Kafka's mapping of a failed __consumer_offsets write to what the client is told
(GroupCoordinatorService.handleOperationException); each coordinator adds its own cases."""
from __future__ import annotations

import kafka.errors as Errors

NONE = 0
COORDINATOR_NOT_AVAILABLE = Errors.CoordinatorNotAvailableError.errno
FENCED_INSTANCE_ID = Errors.FencedInstanceIdError.errno
FENCED_MEMBER_EPOCH = Errors.FencedMemberEpochError.errno
GROUP_ID_NOT_FOUND = Errors.GroupIdNotFoundError.errno
GROUP_MAX_SIZE_REACHED = Errors.GroupMaxSizeReachedError.errno
GROUP_SUBSCRIBED_TO_TOPIC = Errors.GroupSubscribedToTopicError.errno
ILLEGAL_GENERATION = Errors.IllegalGenerationError.errno
INCONSISTENT_GROUP_PROTOCOL = Errors.InconsistentGroupProtocolError.errno
INVALID_GROUP_ID = Errors.InvalidGroupIdError.errno
INVALID_REGULAR_EXPRESSION = 128        # Kafka's INVALID_REGULAR_EXPRESSION; not in kafka-python
INVALID_REQUEST = Errors.InvalidRequestError.errno
INVALID_SESSION_TIMEOUT = Errors.InvalidSessionTimeoutError.errno
MEMBER_ID_REQUIRED = Errors.MemberIdRequiredError.errno
NON_EMPTY_GROUP = Errors.NonEmptyGroupError.errno
NOT_COORDINATOR = Errors.NotCoordinatorError.errno
REBALANCE_IN_PROGRESS = Errors.RebalanceInProgressError.errno
STALE_MEMBER_EPOCH = Errors.StaleMemberEpochError.errno
UNKNOWN_MEMBER_ID = Errors.UnknownMemberIdError.errno
UNKNOWN_TOPIC_OR_PARTITION = Errors.UnknownTopicOrPartitionError.errno
UNRELEASED_INSTANCE_ID = Errors.UnreleasedInstanceIdError.errno
UNSUPPORTED_ASSIGNOR = Errors.UnsupportedAssignorError.errno

# A write the partition refused: the coordinator moved or is not ready.
COMMON_WRITE_ERRORS = {
    Errors.UnknownTopicOrPartitionError.errno: COORDINATOR_NOT_AVAILABLE,
    Errors.NotEnoughReplicasError.errno: COORDINATOR_NOT_AVAILABLE,
    Errors.NotEnoughReplicasAfterAppendError.errno: COORDINATOR_NOT_AVAILABLE,
    Errors.NotLeaderForPartitionError.errno: NOT_COORDINATOR,
    Errors.KafkaStorageError.errno: NOT_COORDINATOR,
}
