"""AlterUserScramCredentials (key 51), v0 (KIP-554).

The client salts and hashes the password (SaltedPassword = Hi(password, salt, iterations)); the
broker derives the stored and server keys and forwards deletions and upsertions to the
controller (controller/scram.py), which checks them as Kafka's ScramControlManager does and
writes the records. A user whose connection is open keeps its session until it re-authenticates
(KIP-368): then the new credentials apply.
Without ALTER on the cluster every named user is answered CLUSTER_AUTHORIZATION_FAILED (KIP-11).
Not implemented: —
"""
from __future__ import annotations

from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse)
from kafka.protocol.api_key import ApiKey

from kafka.errors import ClusterAuthorizationFailedError

from minibroker.broker.context import RequestContext
from minibroker.broker.dispatch import handles
from minibroker.security.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as RT
from minibroker.security.credentials import (
    SCRAM_MECHANISM_NAMES, ScramCredential, Upsertion, credential_from_salted_password)

_Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


@handles(ApiKey.AlterUserScramCredentials, AlterUserScramCredentialsRequest, versions=(0, 0))
async def handle_alter_user_scram_credentials(
        ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    deletions = [(d.name, d.mechanism) for d in req.deletions or ()]
    if not ctx.authorize(Op.ALTER, RT.CLUSTER, CLUSTER_NAME):
        users = dict.fromkeys([n for n, _ in deletions] + [u.name for u in req.upsertions or ()])
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            _Result(user=user, error_code=ClusterAuthorizationFailedError.errno,
                    error_message=None) for user in users])
    upsertions = []
    for u in req.upsertions or ():
        mech = SCRAM_MECHANISM_NAMES.get(u.mechanism)
        cred = (credential_from_salted_password(mech, bytes(u.salt), bytes(u.salted_password),
                                                u.iterations)
                if mech is not None else ScramCredential(b"", b"", b"", u.iterations))
        upsertions.append(Upsertion(u.name, u.mechanism, cred))
    results = await ctx.controller.alter_user_scram_credentials(deletions, upsertions)
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
        _Result(user=user, error_code=code, error_message=message)
        for user, code, message in results])
