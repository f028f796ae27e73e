"""DescribeUserScramCredentials (key 50), v0 (KIP-554).

Answered from the credentials this broker last learned from UpdateMetadata (the controller's
UserScramCredentialRecords), never the salts or keys: each user's mechanisms and iterations.
A user asked for twice: DUPLICATE_RESOURCE; unknown: RESOURCE_NOT_FOUND. users null or empty:
every user.
Not implemented: —
"""
from __future__ import annotations

from kafka.errors import DuplicateResourceError, ResourceNotFoundError
from kafka.protocol.admin import (
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse)
from kafka.protocol.api_key import ApiKey

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.security.credentials import SCRAM_MECHANISM_IDS

_Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
_Info = _Result.CredentialInfo


@handles(ApiKey.DescribeUserScramCredentials, DescribeUserScramCredentialsRequest,
         versions=(0, 0))
async def handle_describe_user_scram_credentials(
        ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    known = ctx.services.credentials.scram_users()
    names = [u.name for u in req.users or ()] or sorted(known)
    results = []
    for name in dict.fromkeys(names):      # each user once, in request order
        if names.count(name) > 1:
            results.append(_Result(user=name, error_code=DuplicateResourceError.errno,
                                   error_message=f"Cannot describe SCRAM credentials for the "
                                                 f"same user twice in a single request: {name}",
                                   credential_infos=[]))
        elif name not in known:
            results.append(_Result(user=name, error_code=ResourceNotFoundError.errno,
                                   error_message=f"Attempt to describe a user credential that "
                                                 f"does not exist: {name}",
                                   credential_infos=[]))
        else:
            results.append(_Result(user=name, error_code=0, error_message=None, credential_infos=[
                _Info(mechanism=SCRAM_MECHANISM_IDS[m], iterations=n) for m, n in known[name]]))
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0,
                                                error_message=None, results=results)
