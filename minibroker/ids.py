"""The only source of randomness and identifiers: a seeded rng owned by the cluster."""
from __future__ import annotations

import base64
import random
import uuid


class IdSource:
    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._rng = random.Random(seed)
        self._next_producer_id = 1000

    @property
    def rng(self) -> random.Random:
        return self._rng

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)

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
