"""A leader's view of followers that have not fetched a partition it newly leads.

A follower learns of a partition from its own LeaderAndIsr, while its fetch to us may already be
long-polling without it (replica.fetch.wait.max.ms, 500 ms): the first acks=all write there, a
fresh topic's first produce or a group's first SyncGroup, waited out that poll. So a new
leadership wakes the follower's waiting fetch (its LeaderAndIsr came first: the next fetch
includes the partition), and while a follower has not fetched a partition we lead for it, its
fetches wait only briefly (ours came first: it is about to add the partition). Either way the
partition is in the follower's next long poll within a few milliseconds.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from minibroker.broker.partition import Partition

SHORT_WAIT_MS = 10
# A follower that never fetches the partition (its LeaderAndIsr was refused, it is stuck) stops
# shortening its polls after this long.
GRACE_S = 5.0
WAKE = object()         # the fetch's future result that ends its wait at once


class FirstFetches:
    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic         # the cluster's clock (Clock.monotonic)
        self._pending: dict[int, dict[tuple[str, int], tuple["Partition", float]]] = {}
        self._waiting: dict[int, set[asyncio.Future[object]]] = {}

    def led(self, p: "Partition") -> None:
        """p.make_leader ran: note the followers that have not fetched p, wake their fetches."""
        now = self._monotonic()
        for r in sorted(p.followers):
            if p.followers[r].log_end_offset >= 0:
                continue
            self._pending.setdefault(r, {})[(p.topic, p.partition)] = (p, now)
            for fut in self._waiting.get(r, ()):
                if not fut.done():
                    fut.set_result(WAKE)

    def max_wait_ms(self, replica_id: int, max_wait_ms: int) -> int:
        """The long poll for a fetch of `replica_id` (after its fetch offsets were recorded)."""
        pending = self._pending.get(replica_id)
        if not pending:
            return max_wait_ms
        now = self._monotonic()
        for key, (p, since) in list(pending.items()):
            f = p.followers.get(replica_id) if p.is_leader else None
            if f is None or f.log_end_offset >= 0 or now - since > GRACE_S \
                    or p.removed:
                del pending[key]
        if not pending:
            del self._pending[replica_id]
            return max_wait_ms
        return min(max_wait_ms, SHORT_WAIT_MS)

    def waiting(self, replica_id: int, fut: asyncio.Future[object]) -> None:
        self._waiting.setdefault(replica_id, set()).add(fut)

    def done_waiting(self, replica_id: int, fut: asyncio.Future[object]) -> None:
        s = self._waiting.get(replica_id)
        if s is not None:
            s.discard(fut)
            if not s:
                del self._waiting[replica_id]
