"""KIP-951 leader discovery hints: a Produce (v10+) or Fetch (v16+) partition answered
NOT_LEADER_OR_FOLLOWER (Fetch also FENCED_LEADER_EPOCH) names the current leader and its epoch
from this broker's metadata, and the response lists those leaders' endpoints, so a client can
retry at once instead of refreshing metadata first."""
from __future__ import annotations

from minibroker.metadata.cache import MetadataCache
from minibroker.protocol.fast import NodeEndpoint


class LeaderHints:
    def __init__(self, cache: MetadataCache) -> None:
        self.cache = cache
        self.leaders: set[int] = set()

    def current_leader(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(leader id, leader epoch) as this broker knows them, or None for an unknown partition."""
        p = self.cache.partition(topic, partition)
        if p is None:
            return None
        self.leaders.add(p.leader)
        return p.leader, p.leader_epoch

    def node_endpoints(self) -> list[NodeEndpoint]:
        """The hinted leaders that are live brokers, by id."""
        brokers = self.cache.brokers
        return [NodeEndpoint(b.node_id, b.host, b.port, b.rack)
                for b in (brokers[i] for i in sorted(self.leaders) if i in brokers)]
