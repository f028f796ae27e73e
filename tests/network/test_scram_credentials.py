"""SCRAM credentials as metadata records (KIP-554): `users` become UserScramCredentialRecords,
DescribeUserScramCredentials / AlterUserScramCredentials go through the controller, brokers
learn credentials from UpdateMetadata, and a credential deleted is refused at that user's next
re-authentication (KIP-368) while other users keep working."""
from __future__ import annotations

import asyncio
import hashlib

from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse)
from scramp import ScramClient

from minibroker.cluster import Cluster
from minibroker.controller.image import MetadataImage
from minibroker.controller.snapshot import from_text, to_text
from minibroker.security.credentials import scram_credential
from minibroker.protocol import records as R
from test_sasl import SASL, Raw

_Del = AlterUserScramCredentialsRequest.ScramCredentialDeletion
_Up = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
SHA256, SHA512 = 1, 2


async def scram_login(raw: Raw, mech: str, user: str, password: str, version: int = 2):
    """The two SaslAuthenticate round trips; returns the last response."""
    assert (await raw.handshake(mech)).error_code == 0
    client = ScramClient([mech], user, password)
    first = await raw.authenticate(client.get_client_first().encode(), version)
    if first.error_code:
        return first
    client.set_server_first(first.auth_bytes.decode())
    return await raw.authenticate(client.get_client_final().encode(), version)


def upsertion(name, mech, password, iterations, salt=b"0123456789abcdef"):
    algo = "sha256" if mech == SHA256 else "sha512"
    salted = hashlib.pbkdf2_hmac(algo, password.encode(), salt, iterations)
    return _Up(name=name, mechanism=mech, iterations=iterations, salt=salt,
               salted_password=salted)


async def until(predicate, what: str) -> None:
    for _ in range(200):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_users_are_records_and_describe_reads_them():
    async with Cluster(**{**SASL, "brokers": 2}) as c:
        image = c.controller.image
        assert sorted(image.scram_credentials) == [
            ("alice", 1), ("alice", 2), ("bob", 1), ("bob", 2)]
        assert all(cred.iterations == 4096 for cred in image.scram_credentials.values())
        raw = await Raw.open(c)
        assert (await scram_login(raw, "SCRAM-SHA-512", "bob", "bob-secret")).error_code == 0
        resp = await raw.request(DescribeUserScramCredentialsRequest(users=None), 0,
                                 DescribeUserScramCredentialsResponse)
        assert [(r.user, r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
                for r in resp.results] == [("alice", 0, [(1, 4096), (2, 4096)]),
                                           ("bob", 0, [(1, 4096), (2, 4096)])]
        U = DescribeUserScramCredentialsRequest.UserName
        resp = await raw.request(DescribeUserScramCredentialsRequest(
            users=[U(name="nobody"), U(name="bob"), U(name="bob")]), 0,
            DescribeUserScramCredentialsResponse)
        assert [(r.user, r.error_code) for r in resp.results] == [("nobody", 91), ("bob", 92)]


async def test_a_deleted_credential_is_refused_at_reauthentication():
    async with Cluster(**{**SASL, "brokers": 2}, connections_max_reauth_ms=2000) as c:
        alice, bob = await Raw.open(c), await Raw.open(c)
        assert (await scram_login(alice, "SCRAM-SHA-256", "alice", "alice-secret")).error_code == 0
        assert (await scram_login(bob, "SCRAM-SHA-256", "bob", "bob-secret")).error_code == 0
        resp = await bob.request(AlterUserScramCredentialsRequest(
            deletions=[_Del(name="alice", mechanism=SHA256), _Del(name="zed", mechanism=SHA256)],
            upsertions=[upsertion("carol", SHA512, "carol-secret", 8192),
                        upsertion("dave", SHA512, "x", 100)]), 0,
            AlterUserScramCredentialsResponse)
        assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [
            ("alice", 0, None),
            ("zed", 91, "Attempt to delete a user credential that does not exist"),
            ("carol", 0, None), ("dave", 93, "Too few iterations")]
        assert sorted(k for k in c.controller.image.scram_credentials if k[0] in ("alice", "carol")) \
            == [("alice", 2), ("carol", 2)]
        await until(lambda: all(b.credentials.get_scram("alice", "SCRAM-SHA-256") is None and
                                b.credentials.get_scram("carol", "SCRAM-SHA-512") is not None
                                for b in c.brokers.values()), "brokers to learn the change")
        # alice's open session goes on until she re-authenticates; then she is refused.
        resp = await scram_login(alice, "SCRAM-SHA-256", "alice", "alice-secret", version=1)
        assert (resp.error_code, resp.error_message) == (
            58, "Authentication failed during re-authentication due to invalid credentials with "
                "SASL mechanism SCRAM-SHA-256")
        assert await alice.closed()
        # bob re-authenticates and keeps working; carol's new credential works.
        resp = await scram_login(bob, "SCRAM-SHA-256", "bob", "bob-secret", version=1)
        assert (resp.error_code, resp.session_lifetime_ms) == (0, 2000)
        carol = await Raw.open(c)
        assert (await scram_login(carol, "SCRAM-SHA-512", "carol", "carol-secret")).error_code == 0
        # The records replay: a new controller's image holds the same credentials.
        old = dict(c.controller.image.scram_credentials)
        assert await c.failover_controller() != -1
        assert dict(c.controller.image.scram_credentials) == old


def test_snapshots_keep_the_credentials():
    cred = scram_credential("SCRAM-SHA-256", "pw", salt=b"\x00salt-salt-salt\xff")
    image = MetadataImage(scram_credentials={("alice", 1): cred})
    assert dict(from_text(to_text(image)).scram_credentials) == {("alice", 1): cred}


def test_record_shapes_are_kafkas():
    assert R.UserScramCredentialRecord.json["apiKey"] == 11
    assert R.RemoveUserScramCredentialRecord.json["apiKey"] == 22
