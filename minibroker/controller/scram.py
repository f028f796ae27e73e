"""SCRAM credentials as controller operations (KIP-554; Kafka's ScramControlManager).

AlterUserScramCredentials becomes UserScramCredentialRecord / RemoveUserScramCredentialRecord;
brokers learn every credential from UpdateMetadata and authenticate against what they were told.
All of a user's changes in one request apply together or not at all, as in Kafka.
"""
from __future__ import annotations

from kafka.errors import (
    DuplicateResourceError, ResourceNotFoundError, UnacceptableCredentialError,
    UnsupportedSaslMechanismError)

from minibroker.controller import records
from minibroker.controller.image import MetadataImage
from minibroker.controller.result import Result
from minibroker.security.credentials import (
    MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_MECHANISM_NAMES as MECHANISM_NAMES, Upsertion)


UserResult = tuple[str, int, "str | None"]     # (user, error code, message)


def _check_upsertion(u: Upsertion) -> tuple[int, str] | None:
    if not u.name:
        return UnacceptableCredentialError.errno, "Username must not be empty"
    mech = MECHANISM_NAMES.get(u.mechanism)
    if mech is None:
        return UnsupportedSaslMechanismError.errno, "Unknown SCRAM mechanism"
    if u.credential.iterations < MIN_ITERATIONS[mech]:
        return UnacceptableCredentialError.errno, "Too few iterations"
    if u.credential.iterations > MAX_ITERATIONS:
        return UnacceptableCredentialError.errno, "Too many iterations"
    return None


def alter_user_scram_credentials(image: MetadataImage, deletions: list[tuple[str, int]],
                                 upsertions: list[Upsertion]) -> Result[list[UserResult]]:
    """Response: [(user, error code, message or None)] in the order users first appear."""
    users: list[str] = []
    errors: dict[str, tuple[int, str]] = {}
    seen: set[tuple[str, int]] = set()
    for name, mech in [*deletions, *((u.name, u.mechanism) for u in upsertions)]:
        if name not in users:
            users.append(name)
        if (name, mech) in seen:
            errors.setdefault(name, (DuplicateResourceError.errno,
                                     "A user credential cannot be altered twice in the same "
                                     "request"))
        seen.add((name, mech))
    for name, mech in deletions:
        if not name:
            errors.setdefault(name, (UnacceptableCredentialError.errno,
                                     "Username must not be empty"))
        elif mech not in MECHANISM_NAMES:
            errors.setdefault(name, (UnsupportedSaslMechanismError.errno,
                                     "Unknown SCRAM mechanism"))
        elif (name, mech) not in image.scram_credentials:
            errors.setdefault(name, (ResourceNotFoundError.errno,
                                     "Attempt to delete a user credential that does not exist"))
    for u in upsertions:
        problem = _check_upsertion(u)
        if problem is not None:
            errors.setdefault(u.name, problem)
    out = []
    for name, mech in deletions:
        if name not in errors:
            out.append(records.remove_user_scram_credential(name, mech))
    for u in upsertions:
        if u.name not in errors:
            out.append(records.user_scram_credential(u.name, u.mechanism, u.credential))
    response: list[UserResult] = [(name, *errors.get(name, (0, None))) for name in users]
    return Result(tuple(out), response)
