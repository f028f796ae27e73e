"""Waiting until this broker's metadata cache shows what the controller committed.

Admin requests forwarded to the controller (CreateTopics, DeleteTopics, CreatePartitions, and
Metadata's auto-creation) answer once this broker sees the change, as Kafka's
DelayedCreatePartitions / DelayedDeleteTopics do: a client's next request here then finds it.
"""
from __future__ import annotations

from typing import Callable

from minibroker.broker.context import RequestContext

POLL_S = 0.005


async def wait_for_metadata(ctx: RequestContext, ready: Callable[[], bool], timeout_ms: int) -> bool:
    """Poll until `ready()`, at most timeout_ms (the request's RequestContext gives the clock
    and broker); False on timeout or when the broker stops."""
    if ready():
        return True
    deadline = ctx.clock.monotonic() + timeout_ms / 1000
    while ctx.clock.monotonic() < deadline and ctx.node.running:
        await ctx.clock.sleep(POLL_S)
        if ready():
            return True
    return ready()


def topic_has_leaders(ctx: RequestContext, name: str, partitions: int) -> bool:
    """This broker's cache has `name` with at least `partitions` partitions, each led."""
    t = ctx.metadata.topics.get(name)
    return (t is not None and len(t.partitions) >= partitions
            and all(p.leader >= 0 for p in t.partitions.values()))
