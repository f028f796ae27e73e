"""A broker's counters: plain integers bumped on the request paths, read by minibroker.metrics.

The hot paths add sizes they already have (a partition's batch bytes, its offset span), once per
partition of a request: no per-record work, no locks, no prometheus_client objects. Gauges
(under-replicated partitions, groups, lag) are not kept here: the exporter computes them from
the broker's state when scraped.
"""
from __future__ import annotations

import collections


class TopicStats:
    __slots__ = ("bytes_in", "messages_in", "bytes_out")

    def __init__(self) -> None:
        self.bytes_in = 0
        self.messages_in = 0
        self.bytes_out = 0        # to consumers; followers' fetches count as replication


class BrokerStats:
    def __init__(self) -> None:
        self.topics: collections.defaultdict[str, TopicStats] = collections.defaultdict(TopicStats)
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        # api key -> [requests, total seconds] (Kafka's RequestMetrics Requests and TotalTimeMs)
        self.requests: collections.defaultdict[int, list[float]] = collections.defaultdict(
            lambda: [0, 0.0])
        self.isr_shrinks = 0
        self.isr_expands = 0

    def request_done(self, api_key: int, seconds: float) -> None:
        r = self.requests[api_key]
        r[0] += 1
        r[1] += seconds
