"""`serve --processes`' broker sessions (processes/heartbeats.py) against a controller stand-in
whose image is built from records, on a clock the test moves: a broker that stops heartbeating
is fenced once its session ran out, one that heartbeats is not, a heartbeat unfences, and time
the controller's own process did not run (stopped, its loop held) counts against nobody."""
from __future__ import annotations

import asyncio

from minibroker.controller import brokers as ops
from minibroker.processes.heartbeats import BrokerHeartbeatManager
from tests.controller.images import A, brokers, replay, topic

SESSION_MS, INTERVAL_MS = 200, 40           # checked every 10 ms


class Controller:
    def __init__(self) -> None:
        self.image = replay(brokers(1, 2, 3) + topic("a", A, {0: (2, 1, 3)}))
        self.running = True

    async def fence_broker(self, broker_id: int) -> None:
        self.image = replay(ops.fence_broker(self.image, broker_id).records, self.image)

    async def unfence_broker(self, broker_id: int, broker_epoch: int) -> bool:
        res = ops.unfence_broker(self.image, broker_id, broker_epoch)
        self.image = replay(res.records, self.image)
        return res.response


class Clock:
    def __init__(self) -> None:
        self.ms = 0

    def now_ms(self) -> int:
        return self.ms


async def _run_until(clock: Clock, sessions: BrokerHeartbeatManager, done,
                     heartbeating: tuple[int, ...], steps: int = 1000) -> None:
    """Advance the clock 5 ms per step (the checker sees no stall), heartbeats from
    `heartbeating` every INTERVAL_MS, until done() (at most `steps` steps)."""
    for _ in range(steps):
        if done():
            return
        clock.ms += 5
        if clock.ms % INTERVAL_MS == 0:
            for b in heartbeating:
                assert await sessions.heartbeat(b, 100 + b)
        await asyncio.sleep(0.005)


def _fenced(ctl: Controller) -> list[int]:
    return sorted(b.broker_id for b in ctl.image.brokers.values() if b.fenced)


async def test_a_silent_broker_is_fenced_and_its_next_heartbeat_unfences_it():
    ctl, clock = Controller(), Clock()
    sessions = BrokerHeartbeatManager(ctl, clock.now_ms, SESSION_MS, INTERVAL_MS)
    task = asyncio.ensure_future(sessions.run())
    try:
        await _run_until(clock, sessions, lambda: _fenced(ctl), heartbeating=(1, 3))
        assert _fenced(ctl) == [2] and clock.ms >= SESSION_MS
        assert ctl.image.topics["a"].partitions[0].leader == 1      # its leadership moved
        assert not await sessions.heartbeat(2, 999)                 # not its epoch: register
        assert await sessions.heartbeat(2, 102) and _fenced(ctl) == []
    finally:
        ctl.running = False
        await task


async def test_time_the_controllers_own_process_did_not_run_counts_against_nobody():
    ctl, clock = Controller(), Clock()
    sessions = BrokerHeartbeatManager(ctl, clock.now_ms, SESSION_MS, INTERVAL_MS)
    task = asyncio.ensure_future(sessions.run())
    try:
        await asyncio.sleep(0.03)
        clock.ms += 10 * SESSION_MS                 # this process was stopped (SIGSTOP)
        await asyncio.sleep(0.05)
        assert _fenced(ctl) == []                   # nobody could have been heard meanwhile
        await _run_until(clock, sessions, lambda: _fenced(ctl), heartbeating=(1, 2))
        assert _fenced(ctl) == [3]                  # but a session still runs out
    finally:
        ctl.running = False
        await task
