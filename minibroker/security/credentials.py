"""The broker's user credentials: PLAIN passwords and SCRAM credentials.

SCRAM credentials are what Kafka stores (UserScramCredentialRecord): salt, stored key, server key
and iterations per user and mechanism; never the password. PLAIN checks a password, which Kafka
reads from the listener's JAAS config (`user_<name>="<password>"`); here `--user NAME:PASSWORD`
(ClusterConfig.users) gives both. One store per cluster (or per process with --processes), fed
by the controller's records.
"""
from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import NamedTuple

from scramp import ScramMechanism

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
# Kafka's ScramMechanism type ids (records, KIP-554's messages).
SCRAM_MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
SCRAM_MECHANISM_NAMES = {v: k for k, v in SCRAM_MECHANISM_IDS.items()}
# Kafka's ScramMechanism minimum and its default for kafka-configs.sh.
MIN_ITERATIONS = {"SCRAM-SHA-256": 4096, "SCRAM-SHA-512": 4096}
DEFAULT_ITERATIONS = 4096
MAX_ITERATIONS = 16384          # Kafka's cap (ScramFormatter / KIP-554)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class Upsertion(NamedTuple):
    """One credential to set (AlterUserScramCredentials, controller/scram.py)."""
    name: str
    mechanism: int                  # SCRAM_MECHANISM_IDS
    credential: ScramCredential


def scram_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                     salt: bytes | None = None) -> ScramCredential:
    """Derive what the broker keeps from a password (salt: random unless given)."""
    salt_, stored, server, n = ScramMechanism(mechanism).make_auth_info(
        password, iteration_count=iterations, salt=salt)
    return ScramCredential(salt_, stored, server, n)


def parse_user(text: str) -> tuple[str, str]:
    """'alice:secret' -> ('alice', 'secret'); ValueError on anything else."""
    name, sep, password = text.partition(":")
    if not sep or not name or not password:
        raise ValueError(f"user {text!r} is not of the form NAME:PASSWORD")
    return name, password


class CredentialStore:
    def __init__(self) -> None:
        self.plain: dict[str, str] = {}
        self.scram: dict[tuple[str, str], ScramCredential] = {}

    def add_plain(self, user: str, password: str) -> None:
        self.plain[user] = password

    def check_plain(self, user: str, password: str) -> bool:
        known = self.plain.get(user)
        # Compared in constant time, and also for an unknown user (no timing oracle on names).
        ok = hmac.compare_digest((known or "\0").encode(), password.encode())
        return known is not None and ok

    def set_scram(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        self.scram[(user, mechanism)] = credential

    def remove_scram(self, user: str, mechanism: str) -> None:
        self.scram.pop((user, mechanism), None)

    def replace_scram(self, credentials: dict[tuple[str, str], ScramCredential]) -> None:
        """Every SCRAM credential, as the controller last said (UpdateMetadata)."""
        self.scram = dict(credentials)

    def copy(self) -> "CredentialStore":
        other = CredentialStore()
        other.plain, other.scram = dict(self.plain), dict(self.scram)
        return other

    def get_scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.scram.get((user, mechanism))

    def scram_users(self) -> dict[str, list[tuple[str, int]]]:
        """user -> [(mechanism, iterations)], sorted: DescribeUserScramCredentials' view."""
        out: dict[str, list[tuple[str, int]]] = {}
        for (user, mech), cred in sorted(self.scram.items()):
            out.setdefault(user, []).append((mech, cred.iterations))
        return out


def store_for_users(users, rng) -> CredentialStore:
    """`--user NAME:PASSWORD` entries -> a PLAIN password and both SCRAM credentials each
    (salts from `rng`, the cluster's seeded one)."""
    store = CredentialStore()
    for text in users:
        name, password = parse_user(text)
        store.add_plain(name, password)
        for mech in SCRAM_MECHANISMS:
            salt = bytes(rng.getrandbits(8) for _ in range(16))
            store.set_scram(name, mech, scram_credential(mech, password, salt=salt))
    return store


def credential_from_salted_password(mechanism: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    """RFC 5802's keys from what AlterUserScramCredentials carries (the client salts and hashes
    the password; the broker never sees it): StoredKey = H(HMAC(salted, "Client Key")),
    ServerKey = HMAC(salted, "Server Key")."""
    name = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    client_key = hmac.new(salted_password, b"Client Key", name).digest()
    return ScramCredential(salt, hashlib.new(name, client_key).digest(),
                           hmac.new(salted_password, b"Server Key", name).digest(), iterations)
