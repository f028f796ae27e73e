"""One real in-process cluster (1 broker, its controller, topic "fuzz") on a loop of its own, for
the fuzz tests: frames go straight to the broker's `handle(conn, frame)`, the server end of an
in-memory connection; anything but an answer or ProtocolViolation (one closed connection) is
recorded in `failures`.
"""
from __future__ import annotations

import asyncio
from typing import Callable

from corpus import TOPIC
from minibroker.cluster import Cluster
from minibroker.network import memory
from minibroker.protocol.framing import ProtocolViolation


class Harness:
    """`loop_factory`: a VirtualTimeLoop makes the requests that wait (a long poll, a
    rebalance, a timeout at its max) cost no real time."""

    def __init__(self, loop_factory: Callable[[], asyncio.AbstractEventLoop]
                 = asyncio.new_event_loop) -> None:
        self.loop = loop_factory()
        self.cluster = Cluster(brokers=1)
        self.run(self.cluster.start())
        self.run(self.cluster.create_topic(TOPIC, 1, 1))
        self.broker = self.cluster.brokers[1]
        self.client = self.run(self._connect())
        mine = self.client.transport.get_extra_info("sockname")
        [self.conn] = [c for c in self.broker.connections if c.peer == mine]
        self.failures: list[str] = []

    async def _connect(self):
        return memory.connect(self.broker.handle, connections=self.broker.connections)

    def run(self, coro, timeout: float = 60):
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def send(self, frame: bytes) -> None:
        try:
            self.answer(frame)
        except (ProtocolViolation, asyncio.TimeoutError):
            pass
        except Exception as e:  # noqa: BLE001 — what the fuzzer looks for
            self.failures.append(f"{frame[:4].hex()} {e!r}")

    def answer(self, frame: bytes, timeout: float = 2) -> bytes | None:
        """The framed response (None: no response), or what the handler raised."""
        async def one():
            parts = await asyncio.wait_for(self.broker.handle(self.conn, memoryview(frame)),
                                           timeout)
            return None if parts is None else b"".join(bytes(p) for p in parts)
        return self.run(one())

    def close(self) -> None:
        self.run(self.cluster.stop())
        self.loop.close()
