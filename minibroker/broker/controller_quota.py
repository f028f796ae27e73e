"""KIP-599: the controller mutation quota, a token bucket of partition mutations per client.

CreateTopics (partitions created), CreatePartitions (added, or marked for deletion) and
DeleteTopics (partitions deleted) count; strict from CreateTopics v6, CreatePartitions v3 and
DeleteTopics v5, permissive below. Kafka sets it per (user, client-id) as the client quota
`controller_mutation_rate`; minibroker has no AlterClientQuotas, so the broker config
`controller.mutation.rate` is every client's default and
`Cluster.set_controller_mutation_rate(rate, client_id)` overrides it per client at run time.
Each broker keeps its own buckets (admin clients send these requests to the controller's broker).

The bucket holds at most B = rate * controller.quota.window.num *
controller.quota.window.size.seconds tokens and refills at `rate` per second. A topic's N
mutations are admitted iff the bucket is not in debt (K >= 0), and then cost N, which may leave it in debt (Kafka's
StrictControllerMutationQuota: one large request is not refused just for being large). While in
debt, the throttle time is how long the refill takes to pay it back: -K / rate.
v0-v2 clients cannot be told "no" per topic (the permissive quota): their request is done, and
only its throttle_time_ms says how long to back off.
"""
from __future__ import annotations

import math


class _Bucket:
    __slots__ = ("tokens", "last_ms")

    def __init__(self, tokens: float, now_ms: int) -> None:
        self.tokens = tokens
        self.last_ms = now_ms


class ControllerMutationQuota:
    def __init__(self, rate: float, window_num: int = 11, window_size_s: int = 1) -> None:
        self.default_rate = rate
        self.window_s = window_num * window_size_s
        self.rates: dict[str, float] = {}          # client id -> its own rate
        self._buckets: dict[str, _Bucket] = {}

    def rate_of(self, client_id: str) -> float:
        return self.rates.get(client_id, self.default_rate)

    def limited(self, client_id: str) -> bool:
        return not math.isinf(self.rate_of(client_id))

    def set_rate(self, rate: float, client_id: str | None = None) -> None:
        if client_id is None:
            self.default_rate = rate
            self._buckets.clear()
        else:
            self.rates[client_id] = rate
            self._buckets.pop(client_id, None)

    def _bucket(self, client_id: str, now_ms: int) -> _Bucket | None:
        rate = self.rate_of(client_id)
        if math.isinf(rate):
            return None
        burst = rate * self.window_s
        b = self._buckets.get(client_id)
        if b is None:
            b = self._buckets[client_id] = _Bucket(burst, now_ms)
        else:
            b.tokens = min(burst, b.tokens + (now_ms - b.last_ms) / 1000 * rate)
            b.last_ms = now_ms
        return b

    def try_record(self, client_id: str, mutations: int, now_ms: int, strict: bool) -> int:
        """Record `mutations`: 0 if admitted, else the throttle time (ms) of a strict refusal."""
        b = self._bucket(client_id, now_ms)
        if b is None:
            return 0
        if strict and b.tokens < 0:
            return self._throttle(b, client_id)
        b.tokens -= mutations
        return 0

    def refund(self, client_id: str, mutations: int) -> None:
        """Give back what a topic the controller then refused had recorded (Kafka records only
        mutations that pass validation; we record before the batch goes to the controller)."""
        b = self._buckets.get(client_id)
        if b is not None:
            b.tokens += mutations

    def response_throttle_ms(self, client_id: str, now_ms: int, strict: bool,
                             refused_ms: int) -> int:
        """A response's throttle_time_ms: a strict request's refusal, a permissive one's debt."""
        return refused_ms if strict else max(refused_ms, self.throttle_time_ms(client_id, now_ms))

    def throttle_time_ms(self, client_id: str, now_ms: int) -> int:
        b = self._bucket(client_id, now_ms)
        return 0 if b is None or b.tokens >= 0 else self._throttle(b, client_id)

    def _throttle(self, b: _Bucket, client_id: str) -> int:
        rate = self.rate_of(client_id)
        return max(1, math.ceil(-b.tokens / rate * 1000)) if rate > 0 else 2**31 - 1
