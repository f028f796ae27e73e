"""The one interception point for faults (kfake's ControlKey, librdkafka's error stacks).

Tests use these instead of monkeypatching; dispatch consults them before every handler, for
every API key: queued request errors first (answered with broker/error_response.py's generic
error response), then the controls.
"""
from __future__ import annotations

import collections
from typing import Any, Callable

from minibroker.broker.error_response import error_response


class Faults:
    def __init__(self) -> None:
        self._controls: dict[int, list[tuple[Callable, bool]]] = collections.defaultdict(list)
        self._errors: dict[int, collections.deque] = collections.defaultdict(collections.deque)
        self.errors_queued = 0      # dispatch skips the fault hooks of raw handlers while 0
        self.enabled_sites: set[str] = set()
        # Per topic: the next requests of an api naming it answer this error for that topic only
        # (partial success across topics); entries are error codes or (code, throttle_time_ms).
        self._topic_errors: dict[tuple[int, str], collections.deque] = {}
        # The controller's part of the next requests of an api takes this long (ms), once each.
        self._stalls: dict[int, collections.deque] = collections.defaultdict(collections.deque)
        # broker id -> ms between an UpdateMetadata arriving and the broker applying it.
        self.update_metadata_delay_ms: dict[int, int] = {}

    def control(self, api_key: int, fn: Callable[[Any, Any], Any], keep: bool = True) -> None:
        """fn(req, ctx) returns a response to short-circuit the handler, or None to pass."""
        self._controls[int(api_key)].append((fn, keep))

    def push_request_errors(self, api_key: int, errors: list) -> None:
        """The next len(errors) requests of api_key fail with these error classes/codes: each is
        answered with the code in every error field (per partition, per group...)."""
        self._errors[int(api_key)].extend(errors)
        self.errors_queued += len(errors)

    def pop_request_error(self, api_key: int) -> int:
        q = self._errors.get(int(api_key))
        if not q:
            return 0
        e = q.popleft()
        self.errors_queued -= 1
        return e if isinstance(e, int) else e.errno

    def push_topic_errors(self, api_key: int, topic: str, errors: list) -> None:
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

    def intercept(self, api_key: int, req: Any, ctx: Any) -> Any:
        """A response standing in for the handler's, or None."""
        if self.errors_queued:
            code = self.pop_request_error(api_key)
            if code:
                return error_response(req, ctx.api_version, code)
        controls = self._controls.get(api_key)
        if not controls:
            return None
        for i, (fn, keep) in enumerate(controls):
            resp = fn(req, ctx)
            if resp is not None:
                if not keep:
                    del controls[i]
                return resp
        return None
