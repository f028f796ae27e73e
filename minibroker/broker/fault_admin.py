"""FaultControl (private API key 1004): the cluster's fault control API over the wire.

`minibroker serve --faults` turns it on; `minibroker faults ...` (cli/faults.py) sends it. Each
request is one command, applied to the in-process Cluster exactly as a test would call it
(Cluster.partition_network, Faults.push_request_errors, ...); the answer carries the active
controller and every fault armed afterwards (JSON). Off, every request is answered
CLUSTER_AUTHORIZATION_FAILED: a client must not be able to stop brokers of a cluster that did
not ask for it.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, overload

import kafka.errors as Errors
from kafka.protocol.api_key import ApiKey

from minibroker.broker.faults import DISCONNECT
from minibroker.protocol.errors import OUR_ERRORS
from minibroker.protocol.messages import FaultControlResponse, PrivateApiKey

COMMANDS = ("error", "latency", "hold", "drop", "release", "stop-broker", "start-broker",
            "restart-broker", "partition", "heal", "isolate-clients", "heal-clients",
            "lose-update-metadata", "slow-update-metadata", "controller-failover", "list", "clear")


class BadCommand(ValueError):
    """An invalid command or argument: answered INVALID_REQUEST with its one-line message."""


def api_key_of(name: str) -> int:
    """Produce / produce / 0 / FaultControl -> the API key (BadCommand if there is none)."""
    if name.lstrip("-").isdigit():
        return int(name)
    for enum in (ApiKey, PrivateApiKey):
        for member in enum:
            if member.name.lower() == name.replace("_", "").replace("-", "").lower():
                return int(member)
    raise BadCommand(f"unknown API {name!r} (Kafka's names, e.g. Produce, Fetch, Metadata, "
                     "or an API key number)")


def error_code_of(name: str) -> int | str:
    """NOT_LEADER_OR_FOLLOWER / 6 / DISCONNECT -> an error code, or DISCONNECT."""
    upper = name.strip().upper()
    if upper == DISCONNECT:
        return DISCONNECT
    if upper.lstrip("-").isdigit():
        return int(upper)
    aliases = {"NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION"}    # Kafka 2.7's new name
    upper = aliases.get(upper, upper)
    known = {**Errors.kafka_errors, **OUR_ERRORS}
    for code in sorted(k for k in known if isinstance(k, int) and k > 0):
        if known[code].message == upper:
            return code
    raise BadCommand(f"unknown error {name!r} (Kafka's error names, e.g. "
                     "NOT_LEADER_OR_FOLLOWER, or DISCONNECT)")


class FaultAdmin:
    """Runs FaultControl commands on a Cluster (given, not imported: the cluster imports us)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self._background: set[asyncio.Task[None]] = set()

    async def handle(self, req: Any, serving_broker: int) -> FaultControlResponse:
        try:
            message = await self._run(req, serving_broker)
            code = 0
        except BadCommand as e:
            code, message = Errors.InvalidRequestError.errno, str(e)
        c = self.cluster
        state = dict(c.faults.describe(),
                     stopped_brokers=sorted(b for b, x in c.brokers.items() if not x.running))
        return FaultControlResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                    controller_id=c.controller_node_id,
                                    state=json.dumps(state, sort_keys=True))

    @overload
    def _broker(self, req: Any) -> int: ...

    @overload
    def _broker(self, req: Any, required: bool) -> int | None: ...

    def _broker(self, req: Any, required: bool = True) -> int | None:
        if req.broker_id == -1:
            if required:
                raise BadCommand(f"{req.command}: which broker? (--broker N)")
            return None
        if req.broker_id not in self.cluster.brokers:
            raise BadCommand(f"{req.command}: no broker {req.broker_id} "
                             f"(the brokers: {sorted(self.cluster.brokers)})")
        return int(req.broker_id)

    def _api(self, req: Any) -> int:
        if req.api_key < 0:
            raise BadCommand(f"{req.command}: which API? (--api NAME)")
        return int(req.api_key)

    @staticmethod
    def _count(req: Any) -> int | None:
        return None if req.count < 0 else req.count

    async def _run(self, req: Any, serving: int) -> str | None:
        c, f, cmd = self.cluster, self.cluster.faults, req.command
        if cmd == "error":
            if not req.errors:
                raise BadCommand("error: which errors? (--errors NAME[,NAME...])")
            stack = [error_code_of(e) for e in req.errors]
            f.push_request_errors(self._api(req), stack * max(req.count, 1), self._broker(req, False))
        elif cmd == "latency":
            f.set_latency(self._broker(req), max(req.ms, 0))
        elif cmd in ("hold", "drop"):
            api, broker = self._api(req), self._broker(req, False)
            if cmd == "hold":
                f.hold(api, None if req.ms < 0 else req.ms, self._count(req), broker)
            else:
                f.drop(api, self._count(req), broker)
        elif cmd == "release":
            return f"{f.release(None if req.api_key < 0 else req.api_key)} released"
        elif cmd in ("stop-broker", "restart-broker", "start-broker"):
            return await self._lifecycle(cmd, self._broker(req), serving)
        elif cmd == "partition":
            if not req.side_a or not req.side_b:
                raise BadCommand("partition: two sides of broker ids are needed, e.g. 1 2,3")
            for b in list(req.side_a) + list(req.side_b):
                req.broker_id = b
                self._broker(req)
            if set(req.side_a) & set(req.side_b):
                raise BadCommand("partition: a broker cannot be on both sides")
            await c.partition_network(req.side_a, req.side_b)
        elif cmd == "heal":
            await c.heal_network()
        elif cmd == "isolate-clients":
            broker = self._broker(req)
            if broker == serving:       # this request's own connection would close unanswered
                return self._defer(self._isolate, broker, cmd)
            c.isolate_clients(broker)
        elif cmd == "heal-clients":
            c.heal_clients(self._broker(req, False))
        elif cmd == "lose-update-metadata":
            f.lose_update_metadata(self._broker(req), self._count(req))
        elif cmd == "slow-update-metadata":
            c.set_metadata_propagation_delay(self._broker(req), req.ms if req.ms > 0 else None)
        elif cmd == "controller-failover":
            await c.failover_controller()
        elif cmd == "clear":
            await c.clear_faults()
        elif cmd != "list":
            raise BadCommand(f"unknown command {cmd!r} (one of: {', '.join(COMMANDS)})")
        return None

    async def _lifecycle(self, cmd: str, broker_id: int, serving: int) -> str | None:
        c = self.cluster
        running = c.brokers[broker_id].running
        if cmd == "stop-broker" and not running or cmd == "start-broker" and running:
            raise BadCommand(f"{cmd}: broker {broker_id} is already "
                             f"{'stopped' if not running else 'running'}")
        op = {"stop-broker": c.stop_broker, "start-broker": c.start_broker,
              "restart-broker": c.restart_broker}[cmd]
        if broker_id != serving or cmd == "start-broker":
            await op(broker_id)
            return None
        # Stopping the broker this request came through would close it before the answer.
        return self._defer(op, broker_id, cmd)

    def _defer(self, op: Callable[[int], Awaitable[object]], broker_id: int, cmd: str) -> str:
        task = asyncio.get_running_loop().create_task(self._after_answer(op, broker_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return f"broker {broker_id} serves this request: {cmd} runs right after the answer"

    async def _isolate(self, broker_id: int) -> None:
        self.cluster.isolate_clients(broker_id)

    @staticmethod
    async def _after_answer(op: Callable[[int], Awaitable[object]], broker_id: int) -> None:
        await asyncio.sleep(0.1)
        await op(broker_id)
