"""Replication throttling, as Kafka's ReplicationQuotaManager (KIP-73), for partition moves.

Two quotas per broker, set by the dynamic broker configs `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` (bytes/s; unset: no limit). They apply only to the replicas
the topic configs `leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`
list ("partition:broker,...", or "*"), and only while the fetching replica is out of the ISR: a
reassignment's new replicas catching up, never the in-sync traffic acks=all waits on.
- Leader side (Fetch handler): a throttled partition gets no records while the leader quota is
  used up (the fetch waits as for no data); bytes sent are counted.
- Follower side (ReplicaFetcher): a throttled partition is left out of the next fetch while the
  follower quota is used up; bytes received are counted.
A quota is a token bucket of one second's bytes, refilled at the rate: over any span the bytes
moved stay below rate * (span + 1 s) plus one fetch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from minibroker.config import FOLLOWER_REPLICATION_THROTTLED_RATE as FOLLOWER_RATE
from minibroker.config import LEADER_REPLICATION_THROTTLED_RATE as LEADER_RATE

if TYPE_CHECKING:
    from minibroker.broker.partition import Partition


class Quota:
    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self.rate: int | None = None        # bytes/s; None: unlimited
        self._tokens = 0.0
        self._at = 0.0

    def set_rate(self, rate: int | None) -> None:
        if rate != self.rate:
            self.rate = rate
            self._tokens, self._at = float(rate or 0), self._now()

    def _refill(self) -> None:
        now = self._now()
        rate = self.rate or 0       # called with a rate set only
        self._tokens = min(self._tokens + (now - self._at) * rate, float(rate))
        self._at = now

    def exceeded(self) -> bool:
        if self.rate is None:
            return False
        self._refill()
        return self._tokens <= 0

    def record(self, nbytes: int) -> None:
        if self.rate is not None:
            self._refill()
            self._tokens -= nbytes

    def seconds_until_available(self) -> float:
        if self.rate is None or not self.rate:
            return 0.0 if self.rate is None else 1.0
        self._refill()
        return max(-self._tokens / self.rate, 0.0) + 0.001


_parsed: dict[str, tuple[bool, frozenset[tuple[int, ...]]]] = {}


def _replicas(value: str) -> tuple[bool, frozenset[tuple[int, ...]]]:
    """"*" -> (True, {}); "0:1,1:2" -> (False, {(0, 1), (1, 2)}); cached per string."""
    got = _parsed.get(value)
    if got is None:
        items = [v.strip() for v in value.split(",") if v.strip()]
        got = (items == ["*"], frozenset(
            tuple(int(x) for x in i.split(":")) for i in items if i != "*"))
        if len(_parsed) < 10000:
            _parsed[value] = got
    return got


def lists(value: str, partition: int, broker_id: int) -> bool:
    """Whether a {leader,follower}.replication.throttled.replicas value names this replica."""
    if not value:
        return False
    every, pairs = _replicas(value)
    return every or (partition, broker_id) in pairs


class ReplicationThrottle:
    """One per broker: the leader and follower quotas, configured from its dynamic configs."""

    def __init__(self, node_id: int, now: Callable[[], float]) -> None:
        self.node_id = node_id
        self.leader = Quota(now)
        self.follower = Quota(now)

    def configure(self, configs: dict[str, str]) -> None:
        for quota, name in ((self.leader, LEADER_RATE), (self.follower, FOLLOWER_RATE)):
            value = configs.get(name)
            quota.set_rate(None if value is None else int(value))

    def leader_throttled(self, p: Partition, replica_id: int) -> bool:
        """Leader side: is follower replica_id's fetch of partition p (led here) throttled?"""
        return (self.leader.rate is not None and replica_id not in p.isr
                and lists(p.log.config.leader_replication_throttled_replicas, p.partition,
                          self.node_id))

    def follower_throttled(self, p: Partition) -> bool:
        """Follower side: is partition p's replica here throttled (quota or not)?"""
        return (self.follower.rate is not None and self.node_id not in p.isr
                and lists(p.log.config.follower_replication_throttled_replicas, p.partition,
                          self.node_id))
