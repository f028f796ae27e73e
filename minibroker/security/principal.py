"""KafkaPrincipal: the identity a connection authenticated as (Kafka's `User:alice`).

A connection that did not authenticate (PLAINTEXT, or SSL without a client certificate) is
User:ANONYMOUS, as in Kafka. ACLs name principals as "Type:name".
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> "KafkaPrincipal":
        """"User:alice" -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"principal {text!r} is not of the form Type:name (e.g. User:alice)")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")

# The principal of connections one in-process broker or controller opens to another through an
# in-memory pipe (network/partitions.py): no client can open one, and no SASL or TLS mapping
# yields its type. The authorizer allows it everything, as Kafka's inter-broker principal in
# super.users.
INTER_BROKER = KafkaPrincipal("Broker", "inter-broker")
