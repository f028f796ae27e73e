"""The feature flags (KIP-584) a broker reports in ApiVersions v3+, as a Kafka 4.0 broker does.

metadata.version: 3.3-IV3 (level 7, Kafka 4.0's minimum) to 4.0-IV3 (25), finalized at 25.
kraft.version 0: a static quorum (controller.quorum.voters; KIP-853's AddRaftVoter is not served).
transaction.version 0: KIP-890 part 2 (epoch bump per transaction) is not implemented.
group.version 1: KIP-848 consumer groups are served (ConsumerGroupHeartbeat).
Supported ranges stop at what minibroker does, so nothing offers an upgrade it cannot make.
A broker emulating a release before 4.0 (--kafka-version) reports no features: their levels
differ per release and are not emulated. Finalized levels of 0 are not listed, as Kafka.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Feature:
    name: str
    min_version: int
    max_version: int
    finalized: int


FEATURES: tuple[Feature, ...] = (
    Feature("group.version", 0, 1, 1),
    Feature("kraft.version", 0, 0, 0),
    Feature("metadata.version", 7, 25, 25),
    Feature("transaction.version", 0, 0, 0),
)


def features_for(kafka_version: str | None, api_version: int
                 ) -> tuple[tuple[Feature, ...], tuple[Feature, ...]]:
    """(supported, finalized) features of a broker emulating `kafka_version` (None: minibroker's
    own) for an ApiVersions request of `api_version`. Below v4 a supported range starting at 0
    is left out (KIP-1022: older clients reject a minimum of 0); finalized: levels above 0."""
    if api_version < 3 or kafka_version is not None and \
            tuple(int(x) for x in kafka_version.split(".")) < (4, 0):
        return (), ()
    return (tuple(f for f in FEATURES if api_version >= 4 or f.min_version > 0),
            tuple(f for f in FEATURES if f.finalized > 0))
