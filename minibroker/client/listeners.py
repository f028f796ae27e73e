"""Calling a user's listener (rebalance listener, KIP-253 partition key listener): its methods may
be sync or async, may be missing, and one that raises is logged without breaking the consumer's
loop."""
from __future__ import annotations

import inspect
import logging
from typing import Any, Iterable

log = logging.getLogger("minibroker.client.consumer")


async def call_listener(listener: Any, name: str, tps: Iterable) -> None:
    fn = getattr(listener, name, None)
    if fn is None:
        return
    try:
        res = fn(sorted(tps))
        if inspect.isawaitable(res):
            await res
    except Exception:  # noqa: BLE001 - a listener's failure must not break the loop
        log.exception("listener %s failed", name)
