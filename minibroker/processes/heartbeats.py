"""Broker sessions for `serve --processes` (KRaft's BrokerHeartbeatManager), kept by the active
controller's process: every broker process heartbeats the active controller each
broker.heartbeat.interval.ms; one not heard from for broker.session.timeout.ms is fenced (its
leaderships move within the ISRs and it leaves them) and unfenced by its next heartbeat.

A process that died is fenced at once, on the supervisor's word (node.py); sessions are for one
that is alive but silent: SIGSTOPped, or its event loop stuck. A new controller gives every broker
a new session, as KRaft's does; time this process itself did not run (stopped, or its loop held)
does not count against anyone's session.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from minibroker.controller.controller import Controller
from minibroker.controller.result import ControllerHalted, ControllerMoved

log = logging.getLogger("minibroker.processes")


class BrokerHeartbeatManager:
    def __init__(self, ctl: Controller, now_ms: Callable[[], int], session_timeout_ms: int,
                 heartbeat_interval_ms: int) -> None:
        self.ctl, self.now_ms = ctl, now_ms
        self.session_timeout_ms = session_timeout_ms
        self.check_s = heartbeat_interval_ms / 4000     # fenced within a quarter interval
        self._since = now_ms()                          # every session's start
        self._last: dict[int, int] = {}                 # broker id -> last heartbeat (ms)
        self._checking = False                          # run() started: the controller is up

    async def heartbeat(self, broker_id: int, broker_epoch: int) -> bool:
        """A broker's heartbeat; False: `broker_epoch` is not its registration's (it registers
        again). While the controller starts (its image is replayed first) it only counts: the
        next one unfences."""
        b = self.ctl.image.brokers.get(broker_id)
        if b is None or b.broker_epoch != broker_epoch:
            return False
        self._last[broker_id] = self.now_ms()
        if b.fenced and self._checking:
            log.info("broker %d heard from again: unfenced", broker_id)
            return await self.ctl.unfence_broker(broker_id, broker_epoch)
        return True

    def expired(self, now: int) -> list[int]:
        """The unfenced brokers whose session ran out."""
        return sorted(b.broker_id for b in self.ctl.image.brokers.values() if not b.fenced
                      and now - self._last.get(b.broker_id, self._since)
                      >= self.session_timeout_ms)

    async def run(self) -> None:
        """Fence expired sessions until the controller stops leading."""
        last_check = self.now_ms()
        self._checking = True
        while self.ctl.running:
            await asyncio.sleep(self.check_s)
            now = self.now_ms()
            stalled = now - last_check - round(2000 * self.check_s)
            last_check = now
            if stalled > 0:
                # This process did not run (stopped, or its loop held): nobody could be heard
                # meanwhile, and what arrived is read first.
                self._since += stalled
                self._last = {b: t + stalled for b, t in self._last.items()}
                continue
            for broker_id in self.expired(now):
                log.info("broker %d: no heartbeat for %d ms: fenced", broker_id,
                         self.session_timeout_ms)
                try:
                    await self.ctl.fence_broker(broker_id)
                except (ControllerMoved, ControllerHalted):
                    return                              # the next controller keeps sessions
