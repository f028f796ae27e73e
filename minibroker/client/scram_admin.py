"""SCRAM credential administration (KIP-554), the Admin client's part: the password is salted and
hashed here (SaltedPassword = Hi(password, salt, iterations)), so it never travels."""
from __future__ import annotations

import hashlib
import secrets
from typing import Any, Iterable

import kafka.errors as Errors
from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest)

from minibroker.security.credentials import (
    DEFAULT_ITERATIONS, SCRAM_MECHANISM_IDS, SCRAM_MECHANISM_NAMES)

_Up = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
_Del = AlterUserScramCredentialsRequest.ScramCredentialDeletion
_User = DescribeUserScramCredentialsRequest.UserName


def _mechanism(name: str) -> int:
    try:
        return SCRAM_MECHANISM_IDS[name.upper()]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {name!r} (one of "
                         f"{', '.join(SCRAM_MECHANISM_IDS)})") from None


def upsertion(user: str, mechanism: str, password: str,
              iterations: int = DEFAULT_ITERATIONS) -> Any:
    mech = _mechanism(mechanism)
    # A salt must be unpredictable (RFC 5802), so not the seeded rng tests repeat.
    salt = secrets.token_bytes(32)
    algo = "sha256" if mech == 1 else "sha512"
    salted = hashlib.pbkdf2_hmac(algo, password.encode("utf-8"), salt, iterations)
    return _Up(name=user, mechanism=mech, iterations=iterations, salt=salt,
               salted_password=salted)


def alter_request(upsertions: Iterable[tuple], deletions: Iterable[tuple[str, str]]) -> Any:
    """upsertions: (user, mechanism, password[, iterations]); deletions: (user, mechanism)."""
    return AlterUserScramCredentialsRequest(
        deletions=[_Del(name=u, mechanism=_mechanism(m)) for u, m in deletions],
        upsertions=[upsertion(*u) for u in upsertions])


def alter_results(resp: Any) -> dict[str, Exception | None]:
    return {r.user: (Errors.for_code(r.error_code)(f"{r.user}: {r.error_message}")
                     if r.error_code else None) for r in resp.results}


def describe_request(users: Iterable[str] | None) -> Any:
    return DescribeUserScramCredentialsRequest(
        users=None if users is None else [_User(name=u) for u in users])


def describe_results(resp: Any) -> dict[str, Any]:
    """{user: [(mechanism, iterations)] or the error}."""
    if resp.error_code:
        raise Errors.for_code(resp.error_code)(resp.error_message or "")
    return {r.user: (Errors.for_code(r.error_code)(f"{r.user}: {r.error_message}")
                     if r.error_code else
                     [(SCRAM_MECHANISM_NAMES.get(i.mechanism, str(i.mechanism)), i.iterations)
                      for i in r.credential_infos])
            for r in resp.results}
