"""The one interception point for faults (kfake's ControlKey, librdkafka-mock's error stacks).

Tests use these instead of monkeypatching; dispatch consults them before every handler, for
every API key, while `armed`: clients cut from the broker (network partitions, below) first, then
queued request errors (answered with broker/error_response.py's generic error response, or a
DISCONNECT: the connection is closed instead), then the controls (a function answering, passing,
dropping or holding), then the hold/drop rules; after the handler, the broker's latency.

Every fault may name one broker (None: every broker). `describe()` lists what is armed (the
admin API's and `minibroker faults list`'s answer); `clear()` disarms every request fault.
"""
from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass
from collections.abc import Callable, Sequence
from typing import Any

from kafka.errors import KafkaError

from minibroker.broker.context import RequestContext
from minibroker.broker.error_response import error_response
from minibroker.network.partitions import NetworkPartitions
from minibroker.protocol.errors import error_name
from minibroker.protocol.framing import ProtocolViolation
from minibroker.protocol.messages import PrivateApiKey

# A queued "error" that closes the connection instead of answering (librdkafka-mock's
# RD_KAFKA_RESP_ERR__TRANSPORT).
DISCONNECT = "DISCONNECT"


class Drop:
    """A control's verdict: never answer this request (the client's request times out)."""


DROP = Drop()


@dataclass(frozen=True)
class Hold:
    """A control's verdict: handle this request `ms` later, or (ms None) once released."""
    ms: int | None = None


@dataclass
class _Rule:
    api_key: int
    broker_id: int | None
    action: str                 # "hold" or "drop"
    count: int | None           # requests still affected; None: every one until cleared
    ms: int | None = None       # hold: this long; None: until release()


class Faults:
    def __init__(self) -> None:
        self._controls: dict[int, list[tuple[Callable[[Any, Any], Any], bool]]] = \
            collections.defaultdict(list)
        # (api key, broker id or None) -> queued error codes / DISCONNECT
        self._errors: dict[tuple[int, int | None], collections.deque[int | str]] = {}
        self.errors_queued = 0
        self.enabled_sites: set[str] = set()
        # Per topic: the next requests of an api naming it answer this error for that topic only
        # (partial success across topics); entries are error codes or (code, throttle_time_ms).
        self._topic_errors: dict[tuple[int, str], collections.deque[int | tuple[int, int]]] = {}
        # The controller's part of the next requests of an api takes this long (ms), once each.
        self._stalls: dict[int, collections.deque[int]] = collections.defaultdict(collections.deque)
        # broker id -> ms between an UpdateMetadata arriving and the broker applying it.
        self.update_metadata_delay_ms: dict[int, int] = {}
        # broker id -> UpdateMetadata requests still to lose (None: every one until cleared).
        self.lost_update_metadata: dict[int, int | None] = {}
        self._rules: list[_Rule] = []
        # api key -> held requests' futures: True once released, False to drop
        self._held: dict[int, list[asyncio.Future[bool]]] = collections.defaultdict(list)
        self.latency_ms: dict[int, int] = {}           # broker id -> ms added to every response
        self.network = NetworkPartitions()
        self.armed = False                  # dispatch skips the hooks while nothing is armed

    def _rearm(self) -> None:
        self.armed = bool(self.errors_queued or any(self._controls.values()) or self._rules
                          or self.latency_ms or self.network.isolated)

    # ------------------------------------------------------------------ request errors
    def push_request_errors(self, api_key: int, errors: Sequence[int | str | type[KafkaError]],
                            broker_id: int | None = None) -> None:
        """The next len(errors) requests of api_key (to `broker_id`, else to any broker) fail
        with these error classes/codes — each answered with the code in every error field (per
        partition, per group...) — or, for DISCONNECT, by closing the connection. Another string
        is refused here (ValueError), not at the request it would fail."""
        wrong = [e for e in errors if isinstance(e, str) and e != DISCONNECT]
        if wrong:
            raise ValueError(f"{wrong[0]!r} is none of an error class, an error code, DISCONNECT")
        q = self._errors.setdefault((int(api_key), broker_id), collections.deque())
        q.extend(e if isinstance(e, (int, str)) else e.errno for e in errors)
        self.errors_queued += len(errors)
        self._rearm()

    def pop_request_error(self, api_key: int, broker_id: int | None = None) -> int | str:
        """The next queued error for a request of api_key to broker_id (its own stack first),
        or 0."""
        for key in ((int(api_key), broker_id), (int(api_key), None)):
            q = self._errors.get(key)
            if q:
                e = q.popleft()
                self.errors_queued -= 1
                if not self.errors_queued:
                    self._rearm()
                return e
        return 0

    def push_topic_errors(self, api_key: int, topic: str,
                          errors: Sequence[int | tuple[int, int] | type[KafkaError]]) -> None:
        """The next len(errors) requests of api_key that name `topic` answer it with these (error
        classes, codes, or (code, throttle_time_ms) pairs); other topics are processed as usual."""
        q = self._topic_errors.setdefault((int(api_key), topic), collections.deque())
        q.extend(e if isinstance(e, (int, tuple)) else e.errno for e in errors)

    def pop_topic_error(self, api_key: int, topic: str) -> tuple[int, int]:
        """(error code, throttle_time_ms) forced for this topic, or (0, 0)."""
        q = self._topic_errors.get((int(api_key), topic))
        if not q:
            return 0, 0
        e = q.popleft()
        return e if isinstance(e, tuple) else (e, 0)

    def stall(self, api_key: int, ms: int, count: int = 1) -> None:
        """The controller's part of the next `count` requests of api_key takes `ms` longer (a
        controller busy elsewhere): with a smaller timeout_ms they answer REQUEST_TIMED_OUT."""
        self._stalls[int(api_key)].extend([ms] * count)

    def pop_stall_ms(self, api_key: int) -> int:
        q = self._stalls.get(int(api_key))
        return q.popleft() if q else 0

    def enable(self, site: str) -> None:
        self.enabled_sites.add(site)

    def disable(self, site: str) -> None:
        self.enabled_sites.discard(site)

    # ------------------------------------------------------------------ controls, hold, drop
    def control(self, api_key: int, fn: Callable[[Any, Any], Any], keep: bool = True) -> None:
        """fn(req, ctx) returns a response to short-circuit the handler, None to pass, DROP to
        never answer, or Hold(ms) to handle the request later (kfake's ControlKey)."""
        self._controls[int(api_key)].append((fn, keep))
        self._rearm()

    def hold(self, api_key: int, ms: int | None = None, count: int | None = None,
             broker_id: int | None = None) -> None:
        """The next `count` requests of api_key (None: every one until cleared) are handled `ms`
        later, or (ms None) once release() is called."""
        self._rules.append(_Rule(int(api_key), broker_id, "hold", count, ms))
        self._rearm()

    def drop(self, api_key: int, count: int | None = None, broker_id: int | None = None) -> None:
        """The next `count` requests of api_key (None: every one until cleared) are never
        answered; the connection stays open (later responses on it queue behind the dropped one,
        as on a stuck broker) until the client gives up, or clear() closes it."""
        self._rules.append(_Rule(int(api_key), broker_id, "drop", count))
        self._rearm()

    def release(self, api_key: int | None = None) -> int:
        """Handle the requests held until release (of api_key, else all); returns how many."""
        keys = [int(api_key)] if api_key is not None else sorted(self._held)
        n = 0
        for k in keys:
            for fut in self._held.pop(k, []):
                if not fut.done():
                    fut.set_result(True)
                    n += 1
        return n

    def set_latency(self, broker_id: int, ms: int | None) -> None:
        """Every response of broker_id leaves `ms` later (None or 0: no added latency)."""
        if ms:
            self.latency_ms[int(broker_id)] = int(ms)
        else:
            self.latency_ms.pop(int(broker_id), None)
        self._rearm()

    def lose_update_metadata(self, broker_id: int, count: int | None = None) -> None:
        """The next `count` UpdateMetadata requests to broker_id (None: every one until cleared)
        are lost: acknowledged, never applied, so its metadata stays as it was."""
        self.lost_update_metadata[int(broker_id)] = count

    def take_lost_update_metadata(self, broker_id: int) -> bool:
        """Whether this UpdateMetadata to broker_id is lost (counts it)."""
        if broker_id not in self.lost_update_metadata:
            return False
        left = self.lost_update_metadata[broker_id]
        if left is not None:
            if left <= 1:
                del self.lost_update_metadata[broker_id]
            else:
                self.lost_update_metadata[broker_id] = left - 1
        return True

    def isolate_clients(self, broker_id: int) -> None:
        """Clients are cut from broker_id: every request on a client connection closes it."""
        self.network.isolate_clients(broker_id)
        self._rearm()

    def heal_clients(self, broker_id: int | None = None) -> None:
        self.network.heal_clients(broker_id)
        self._rearm()

    # ------------------------------------------------------------------ dispatch's hooks
    async def intercept(self, api_key: int, req: Any, ctx: RequestContext) -> Any:
        """A response standing in for the handler's, or None (the handler runs); may wait (a
        hold), or raise ProtocolViolation (a disconnect, a drop released by clear())."""
        if api_key == PrivateApiKey.FaultControl:
            return None                     # faults never stop the fault control API itself
        node = ctx.node_id
        if self.network.isolated and node in self.network.isolated and not ctx.control_plane \
                and not self.network.is_inter_broker(getattr(ctx.conn, "peer", None),
                                                 getattr(ctx.conn, "local", None)):
            raise ProtocolViolation(f"network partition: clients cut from broker {node}")
        if self.errors_queued:
            code = self.pop_request_error(api_key, node)
            if isinstance(code, str):               # DISCONNECT, the one string queued
                raise ProtocolViolation(f"fault injected: disconnect on api key {api_key}")
            if code:
                return error_response(req, ctx.api_version, code)
        for i, (fn, keep) in enumerate(self._controls.get(api_key, ())):
            resp = fn(req, ctx)
            if resp is not None:
                if not keep:
                    del self._controls[api_key][i]
                    self._rearm()
                if isinstance(resp, Drop):
                    return await self._wait(api_key, None, drop=True)
                if isinstance(resp, Hold):
                    return await self._wait(api_key, resp.ms, drop=False)
                return resp
        rule = self._take_rule(api_key, node)
        if rule is not None:
            return await self._wait(api_key, rule.ms, drop=rule.action == "drop")
        return None

    def _take_rule(self, api_key: int, node: int) -> _Rule | None:
        for i, r in enumerate(self._rules):
            if r.api_key == api_key and r.broker_id in (None, node):
                if r.count is not None:
                    r.count -= 1
                    if r.count <= 0:
                        del self._rules[i]
                        self._rearm()
                return r
        return None

    async def _wait(self, api_key: int, ms: int | None, drop: bool) -> None:
        if ms is not None and not drop:
            await asyncio.sleep(ms / 1000)
            return None
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._held[api_key].append(fut)
        released = await fut
        if drop or not released:
            raise ProtocolViolation(f"fault injected: request of api key {api_key} dropped")
        return None

    async def delay_response(self, node_id: int, api_key: int) -> None:
        ms = self.latency_ms.get(node_id)
        if ms and api_key != PrivateApiKey.FaultControl:
            await asyncio.sleep(ms / 1000)

    # ------------------------------------------------------------------ listing, clearing
    def describe(self) -> dict[str, Any]:
        """What is armed, as plain data (sorted; error codes by name)."""
        def name(e: int | str) -> str:
            return e if isinstance(e, str) else error_name(e)
        return dict(
            errors=[dict(api_key=k, broker_id=b, errors=[name(e) for e in q])
                    for (k, b), q in sorted(self._errors.items(), key=lambda kv: (kv[0][0],
                                            -1 if kv[0][1] is None else kv[0][1])) if q],
            rules=[dict(api_key=r.api_key, broker_id=r.broker_id, action=r.action,
                        count=r.count, ms=r.ms) for r in self._rules],
            held=sum(len(v) for v in self._held.values()),
            latency_ms=dict(sorted(self.latency_ms.items())),
            update_metadata_delay_ms=dict(sorted(self.update_metadata_delay_ms.items())),
            lost_update_metadata=dict(sorted(self.lost_update_metadata.items())),
            partitions=[list(c) for c in self.network.cuts()],
            isolated_from_clients=sorted(self.network.isolated))

    def clear(self) -> None:
        """Disarm every request fault: error stacks, controls, hold/drop rules (held requests
        are handled, dropped ones' connections closed), latency, lost/slow UpdateMetadata.
        Network partitions stay (Cluster.heal_network / heal_clients end them)."""
        self._errors.clear()
        self.errors_queued = 0
        self._topic_errors.clear()
        self._stalls.clear()
        self._controls.clear()
        self._rules.clear()
        for futs in self._held.values():
            for fut in futs:
                if not fut.done():
                    fut.set_result(True)
        self._held.clear()
        self.latency_ms.clear()
        self.update_metadata_delay_ms.clear()
        self.lost_update_metadata.clear()
        self._rearm()
