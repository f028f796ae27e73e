"""The only source of randomness and identifiers: a seeded rng owned by the cluster."""
from __future__ import annotations

import base64
import random
import uuid


class IdSource:
    """`random_ids`: an unseeded cluster's source: uuids (topic ids, member ids, the cluster id)
    come from the OS, so no two clusters share them (a client's topic-recreation bug then
    shows), while the rng's other draws (replica placement) still follow `seed`."""

    def __init__(self, seed: int = 0, random_ids: bool = False) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._next_producer_id = 1000
        self.random_ids = random_ids

    @property
    def rng(self) -> random.Random:
        return self._rng

    def uuid(self) -> uuid.UUID:
        drawn = self._rng.getrandbits(128)      # drawn either way: the rng's later draws agree
        return uuid.uuid4() if self.random_ids else uuid.UUID(int=drawn, version=4)

    def topic_id(self) -> uuid.UUID:
        return self.uuid()

    def cluster_id(self) -> str:
        return _cluster_id(self.uuid())

    def member_id(self, client_id: str) -> str:
        return f"{client_id}-{self.uuid()}"

    def producer_id(self) -> int:
        pid = self._next_producer_id
        self._next_producer_id += 1
        return pid


def _cluster_id(u: uuid.UUID) -> str:
    # Kafka cluster ids are 22-char url-safe base64 of a UUID.
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def random_cluster_id() -> str:
    """An unseeded cluster's id: from the OS's randomness, so no two clusters share one."""
    return _cluster_id(uuid.uuid4())
