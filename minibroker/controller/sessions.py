"""Broker sessions and controller leadership under network partitions (KRaft's heartbeats).

Kafka brokers heartbeat the active controller every broker.heartbeat.interval.ms; one whose
heartbeats stop for broker.session.timeout.ms is fenced (its leaderships move, it leaves every
ISR), and unfenced once they reach the controller again. The active controller keeps leading the
metadata quorum only while it reaches a majority of the live voters; cut off from them for
controller.quorum.fetch.timeout.ms, it resigns and the majority side elects another.

In process a heartbeat can fail only when a partition (Cluster.partition_network) cuts the link,
so this runs only while a partition is in place, and until every broker it fenced is back.
Checked once per heartbeat interval, on the cluster's clock (virtual time in a simulation).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from minibroker.controller.result import ControllerHalted, ControllerMoved

log = logging.getLogger("minibroker.controller.sessions")


class BrokerSessions:
    def __init__(self, cluster: Any) -> None:
        """cluster: the minibroker.cluster.Cluster (not imported: it imports this module)."""
        self.cluster = cluster
        self._task: asyncio.Task[None] | None = None
        self._last_heartbeat_ms: dict[int, int] = {}
        self.fenced: set[int] = set()       # fenced for a lost session, or never registered
        self._controller: Any = None
        self._without_majority_since: int | None = None

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def broker_started(self, broker_id: int, registered: bool) -> None:
        self._last_heartbeat_ms[broker_id] = self._now()
        if registered:
            self.fenced.discard(broker_id)
        else:                       # it registers once its heartbeats reach the controller
            self.fenced.add(broker_id)
            self.start()

    def broker_stopped(self, broker_id: int) -> None:
        self._last_heartbeat_ms.pop(broker_id, None)
        self.fenced.discard(broker_id)

    def _now(self) -> int:
        now: int = self.cluster.clock.now_ms()
        return now

    async def _run(self) -> None:
        c = self.cluster
        while True:
            await asyncio.sleep(c.config.broker_heartbeat_interval_ms / 1000)
            await self.tick()
            if not c.faults.network.partitioned and not self.fenced and \
                    (c.controller is not None or not c.controller_wanted):
                return

    async def tick(self) -> None:
        """One heartbeat round: elect a controller if none leads, let a controller without a
        majority resign, fence brokers whose session expired, unfence those heard from again."""
        c = self.cluster
        net = c.faults.network
        now = self._now()
        if c.controller is None and c.controller_wanted:
            await c.elect_controller()
        ctl = c.controller
        if ctl is None:
            return
        if ctl is not self._controller:     # a new controller gives every broker a new session
            self._controller = ctl
            self._without_majority_since = None
            self._last_heartbeat_ms = {b: now for b in sorted(c.brokers)}
        if not c.can_lead(ctl.controller_id):
            if self._without_majority_since is None:
                self._without_majority_since = now
            if now - self._without_majority_since >= c.config.controller_quorum_fetch_timeout_ms:
                log.info("controller %d lost the quorum's majority: resigning", ctl.controller_id)
                await c.failover_controller()
            return
        self._without_majority_since = None
        timeout = c.config.broker_session_timeout_ms
        for bid in sorted(c.brokers):
            if not c.brokers[bid].running:
                continue
            if net.reachable(bid, ctl.controller_id):
                self._last_heartbeat_ms[bid] = now
                if bid in self.fenced:
                    await self._register(bid)
            elif bid not in self.fenced and \
                    now - self._last_heartbeat_ms.setdefault(bid, now) >= timeout:
                log.info("broker %d: no heartbeat for %d ms: fenced", bid, timeout)
                self.fenced.add(bid)
                await c.fence_broker(bid)

    async def _register(self, broker_id: int) -> None:
        try:
            await self.cluster.register(broker_id)
        except (ControllerMoved, ControllerHalted):
            return                  # the next round tries again
        self.fenced.discard(broker_id)
