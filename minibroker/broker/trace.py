"""Protocol trace (`serve --trace FILE`, `Cluster(trace=FILE)`): one JSON line per request and
per response a client listener handles, for client authors to see exactly what their client sent
and was answered.

A request line: time (the cluster clock, ms), broker, connection id (per tracer, in the order
connections first spoke), the client's client_id and software name/version (ApiVersions v3+,
KIP-511, remembered per connection), API key, name, version, correlation id and the decoded
fields. Record sets are summarised per batch (base offset, record count, producer id and epoch,
base sequence, codec, transactional/control, size), never their bytes; other byte fields show as
hex up to 64 bytes, else their size. A response line: the same ids, the decoded fields, every
non-zero error code by name, throttle_time_ms and the latency. A connection closed for bad input
gets a "closed" line with the reason.

Off by default and free then: dispatch.handler_for wraps dispatch only when a broker has a
tracer. On, dispatch shows the tracer each request as it decoded it, before the handler runs
(Produce's raw body is summarised then: the handler may patch the batch headers in place), and
the handler's response object before encoding it; Fetch's fast path hands over what it encoded
(RawResponse.source, trace_json.fetch_json) and only Produce's encoded answer is decoded again.
Lines are written as text from per-connection fragments and per-message-version generated
functions (broker/trace_json.py), not as dicts through a JSON encoder.
"""
from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import struct
import sys
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TextIO, cast

from kafka.errors import for_code
from kafka.protocol.api_message import ResponseClassRegistry

from minibroker.broker.dispatch import RawResponse, decode_exact, handler_for
from minibroker.broker.trace_json import (
    ENCODE, batches, batches_json, fetch_json, fields_json, quote)
from minibroker.protocol.fast import ProduceRequestView, decode_produce
from minibroker.protocol.framing import API_PREFIX, ProtocolViolation, parse_request_header
from minibroker.network.client import decode_response

if TYPE_CHECKING:
    from minibroker.broker.broker import Broker
    from minibroker.broker.context import Connection, Handler, RequestContext, Services
    from minibroker.broker.strict import Strict
    from minibroker.config import ClusterConfig
    from minibroker.protocol.framing import RequestHeader

_UNSEEN = object()      # dispatch never showed the response (it answered before decoding)
_ABSENT = object()      # no client id read (a frame too short or of an unknown API)
_FRAGS_PER_CONN = 64    # (API, version, client id) fragments kept per connection
_ANSWERS_KEPT = 64      # cached response bodies summarised (Tracer._answers)
FLUSH_S = 0.1           # a trace file is written at most this long after a line...
FLUSH_BYTES = 1 << 16   # ...or at once when this much is gathered


def error_name(code: int) -> str:
    try:
        return str(for_code(code).message)      # Kafka's name: NOT_LEADER_OR_FOLLOWER
    except Exception:  # noqa: BLE001 — our own codes (protocol/errors.py) and unknown ones
        return str(code)


@functools.cache
def response_class(request_class: Any) -> Any:
    """XRequest → XResponse (the module's, else kafka-python's registry by api key)."""
    mod = sys.modules[request_class.__module__]
    cls = getattr(mod, request_class.__name__.replace("Request", "Response", 1), None)
    if cls is None:
        cls = ResponseClassRegistry._response_class_registry[request_class.API_KEY]
    return cls[None] if getattr(cls, "_class_version", None) is not None else cls


def produce_fields(view: ProduceRequestView) -> dict[str, Any]:
    """A Produce request's fields, record sets summarised (strict mode's checks read them)."""
    return {"transactional_id": view.transactional_id, "acks": view.acks,
            "timeout_ms": view.timeout_ms,
            "topic_data": [{"name": t.name, "partition_data": [
                {"index": p.index, "records": None if p.records is None else batches(p.records)}
                for p in t.partitions]} for t in view.topics]}


def produce_json(view: ProduceRequestView) -> str:
    """produce_fields(view) as JSON text."""
    topics = ",".join('{"name":%s,"partition_data":[%s]}' % (
        quote(t.name) if type(t.name) is str else ENCODE(t.name),
        ",".join('{"index":%d,"records":%s}' % (
            p.index, "null" if p.records is None else batches_json(p.records))
            for p in t.partitions)) for t in view.topics)
    return '{"transactional_id":%s,"acks":%d,"timeout_ms":%d,"topic_data":[%s]}' % (
        ENCODE(view.transactional_id), view.acks, view.timeout_ms, topics)


class _Conn:
    """What the tracer (and strict mode) remember of one client connection."""
    __slots__ = ("id", "software_name", "software_version", "negotiated", "in_flight",
                 "throttled_until", "member_id_required", "spoke", "frags", "__weakref__")

    def __init__(self, conn_id: int) -> None:
        self.id = conn_id
        self.software_name: str | None = None                        # ApiVersions v3+ (KIP-511)
        self.software_version: str | None = None
        self.negotiated: dict[int, tuple[int, int]] | None = None   # its ApiVersions answer
        self.in_flight: set[int] = set()                             # correlation ids
        self.throttled_until = 0.0                                   # monotonic s (KIP-219)
        self.member_id_required: dict[str, str] = {}                 # group → member id given
        self.spoke = False                                           # its first request seen
        # (api key, version, client id) → the JSON of the ids before and after "corr"
        self.frags: dict[tuple[int | None, int | None, Any], tuple[str, str]] = {}


class _Exchange:
    """One request through dispatch: the RequestObserver dispatch is given, and what the
    response line needs of the request line."""
    __slots__ = ("tracer", "broker", "state", "frame", "started", "base_ms", "key", "version",
                 "ids", "line", "req", "resp")

    def __init__(self, tracer: Tracer, broker: Services, state: _Conn, frame: memoryview
                 ) -> None:
        self.tracer, self.broker, self.state = tracer, broker, state
        self.frame: memoryview | None = frame
        clock = broker.clock
        self.started = clock.monotonic()
        self.base_ms = clock.wall_base_ms  # now_ms() is base + monotonic ms: read the clock once
        self.key: int | None = None
        self.version: int | None = None
        self.ids = ("", "", "")     # JSON: broker to version, ',"corr":N', client id and software
        self.line: dict[str, Any] | None = None      # the request line as a dict (strict mode)
        self.req: Any = None
        self.resp: Any = _UNSEEN

    def request(self, handler: Handler, header: RequestHeader, req: Any) -> Any:
        self.key, self.version = header.api_key, header.api_version
        return self.tracer.requested(self, handler, header.client_id, req, None,
                                     header.correlation_id)

    def response(self, resp: Any) -> None:
        self.resp = resp


class Tracer:
    """Observes every request and response of the brokers given it (`attach`): writes the trace
    lines to `sink` (a text stream, a callable taking one line, or None: no trace) and hands
    each exchange to strict mode's checks (`strict`, minibroker.broker.strict), if on."""

    def __init__(self, sink: TextIO | Callable[[str], None] | None, strict: Strict | None = None
                 ) -> None:
        # (mypy does not narrow a union by hasattr)
        self.stream = cast("TextIO | None", sink if hasattr(sink, "write") else None)
        self._flush: Callable[[], None] = lambda: None      # a stream's writer replaces it
        write = self._to(self.stream) if self.stream is not None \
            else cast("Callable[[str], None] | None", sink)
        if write is not None:
            self.emit = write               # type: ignore[method-assign,assignment]
        self.strict = strict
        self._conns: dict[int, _Conn] = {}     # id(connection) → its state, while it lives
        self._next_conn = 0
        # id(body) → (body, (api key, version), response, its line's fields/errors/throttle)
        self._answers: dict[int, tuple[bytes, tuple[int, int], Any, dict[str, Any]]] = {}

    def _to(self, stream: TextIO) -> Callable[[str], None]:
        """Lines are gathered and written (and flushed) at most every FLUSH_S seconds, or at
        once past FLUSH_BYTES: one write call and one flush per interval, not per line or per
        loop turn (a flush per turn was most of Metadata's traced cost). `flush()` writes what
        is gathered now (the pytest plugin calls it before reading a failing test's lines)."""
        pending: list[str] = []
        size = [0]
        context = contextvars.Context()     # flush reads no context variable: none copied

        def flush() -> None:
            if pending and not stream.closed:
                stream.write("\n".join(pending) + "\n")
                stream.flush()
            pending.clear()
            size[0] = 0

        def write(line: str) -> None:
            if not pending:
                try:
                    asyncio.get_running_loop().call_later(FLUSH_S, flush, context=context)
                except RuntimeError:        # no loop: at once
                    pending.append(line)
                    flush()
                    return
            pending.append(line)
            size[0] += len(line)
            if size[0] > FLUSH_BYTES:
                flush()                     # the timer finds nothing pending, or a later line
        self._flush = flush
        return write

    def flush(self) -> None:
        """Write the lines gathered so far (call it on the cluster's loop)."""
        self._flush()

    def close(self) -> None:
        if self.stream is not None:
            self._flush()               # what the last interval gathered
            if self.stream is not sys.stderr:
                self.stream.close()

    def conn_state(self, conn: Connection) -> _Conn:
        state = self._conns.get(id(conn))
        if state is None:
            self._next_conn += 1
            state = self._conns[id(conn)] = _Conn(self._next_conn)
            # forgotten with the connection, so its id cannot name a later one's state
            weakref.finalize(conn, self._conns.pop, id(conn), None)
        return state

    def emit(self, text: str) -> None:
        """Writes one line (replaced per instance by the sink's own writer, one call less)."""

    async def dispatch(self, dispatch: Callable[..., Awaitable[list[Any] | None]],
                       broker: Services, context: type[RequestContext], conn: Connection,
                       frame: memoryview) -> list[Any] | None:
        """dispatch(services, context, conn, frame), with its request and response traced and
        checked. `broker`: the broker's Services."""
        state = self._conns.get(id(conn))
        ex = _Exchange(self, broker, state if state is not None else self.conn_state(conn), frame)
        coro = dispatch(broker, context, conn, frame, observer=ex)
        del frame       # the handler may let the frame go while it waits (dispatch.py)
        try:
            parts = await coro
        except ProtocolViolation as e:
            self.unobserved(ex)     # refused before it was decoded
            if ex.line is not None:
                ex.state.in_flight.discard(ex.line.get("corr"))
            head, corr, tail = ex.ids
            self.emit('{"time":%d,"dir":"closed",%s%s%s,"reason":%s}' % (
                broker.clock.now_ms(), head, corr, tail, quote(str(e))))
            raise
        except BaseException:
            self.unobserved(ex)
            raise
        if ex.frame is not None:    # answered before decoding (ApiVersions of a newer version)
            self.unobserved(ex)
        self.responded(ex, parts)
        return parts

    def requested(self, ex: _Exchange, handler: Handler | None, client_id: Any, req: Any,
                  undecodable: str | None, corr: int | None) -> Any:
        """Writes the request line. req: as dispatch decoded it (a raw handler's: the body), or
        None (not decoded: `undecodable` says why, or a version out of range). Returns what the
        handler is to get: `req`, or a Produce body decoded (protocol.fast)."""
        frame, broker, state = ex.frame, ex.broker, ex.state
        ex.frame = None             # written: the frame is the handler's alone again
        assert frame is not None
        key, version = ex.key, ex.version
        text, given = None, req
        try:
            if req is None or handler is None or version is None:
                pass
            elif key == 0 and handler.raw:
                given = decode_produce(req, version)
                text = produce_json(given)
                req = produce_fields(given) if self.strict is not None else None
            else:
                if handler.raw:
                    req = decode_exact(handler.request_class, req, version)
                text = fields_json(req, version, set())
                if key == 18 and version >= 3:
                    state.software_name = req.client_software_name
                    state.software_version = req.client_software_version
                    state.frags.clear()
        except (ProtocolViolation, ValueError, struct.error) as e:
            undecodable, req = str(e), None
        ex.req = req
        ex.ids = head, corr_text, tail = self._ids(ex, handler, client_id, corr)
        now_ms = ex.base_ms + int(ex.started * 1000)
        rest = "" if text is None else ',"fields":' + text
        if undecodable is not None:
            rest += ',"undecodable":' + quote(undecodable)
        if self.strict is not None:
            line = ex.line = self._line(ex, now_ms, handler, client_id, corr, undecodable)
            self.strict.on_request(broker, state, line, req, frame)
            if "violations" in line:
                rest += ',"violations":' + ENCODE(line["violations"])
        self.emit('{"time":%d,"dir":"request",%s%s%s%s}' % (now_ms, head, corr_text, tail, rest))
        return given

    def unobserved(self, ex: _Exchange) -> None:
        """The request line of a frame dispatch refused or answered before decoding it: what
        can be read of it (the client is named whenever the header reads)."""
        frame = ex.frame
        if frame is None:
            return
        handler, corr, version = None, None, 0
        if len(frame) >= 8:
            key, version, corr = API_PREFIX.unpack_from(frame, 0)
            ex.key, ex.version = key, version
            handler = ex.broker.handlers.get(key)
        client_id: Any = _ABSENT
        req: Any = None
        undecodable = None
        if handler is not None:
            try:
                # The client id reads the same in header v1 and v2 (v2 appends tagged fields).
                header = parse_request_header(frame, False)
                client_id = header.client_id
                if handler.versions[0] <= version <= handler.versions[1]:
                    if version >= handler.flexible_from:
                        header = parse_request_header(frame, True)
                    body = frame[header.body_offset:]
                    req = body if handler.raw else decode_exact(handler.request_class, body,
                                                                 version)
            except (ProtocolViolation, ValueError, struct.error) as e:
                undecodable = str(e)
        self.requested(ex, handler, client_id, req, undecodable, corr)

    @staticmethod
    def _ids(ex: _Exchange, handler: Handler | None, client_id: Any, corr: int | None
             ) -> tuple[str, str, str]:
        """The JSON of a line's ids: made once per connection, API, version and client id."""
        state, key, version = ex.state, ex.key, ex.version
        cache_key = (key, version, client_id)
        frags = state.frags.get(cache_key)
        if frags is None:
            head = '"broker":%d,"conn":%d' % (ex.broker.node_id, state.id)
            if key is not None and version is not None:
                head += ',"api_key":%d,"api":%s,"version":%d' % (
                    key, quote(handler.name if handler else str(key)), version)
            tail = "" if client_id is _ABSENT else ',"client_id":' + ENCODE(client_id)
            if state.software_name is not None:
                tail += ',"software":' + ENCODE(f"{state.software_name}/"
                                                f"{state.software_version}")
            if len(state.frags) >= _FRAGS_PER_CONN:
                state.frags.clear()
            frags = state.frags[cache_key] = (head, tail)
        return frags[0], "" if corr is None else ',"corr":%d' % corr, frags[1]

    @staticmethod
    def _line(ex: _Exchange, now_ms: int, handler: Handler | None, client_id: Any,
              corr: int | None, undecodable: str | None) -> dict[str, Any]:
        """The request line as a dict, for strict mode's checks."""
        state = ex.state
        line: dict[str, Any] = {"time": now_ms, "dir": "request", "broker": ex.broker.node_id,
                      "conn": state.id}
        if ex.key is not None:
            line.update(api_key=ex.key, api=handler.name if handler else str(ex.key),
                        version=ex.version, corr=corr)
        if client_id is not _ABSENT:
            line["client_id"] = client_id
        if undecodable is not None:
            line["undecodable"] = undecodable
        if state.software_name is not None:
            line["software"] = f"{state.software_name}/{state.software_version}"
        return line

    def responded(self, ex: _Exchange, parts: list[Any] | None) -> None:
        """Writes the response line: fields, error names, throttle and latency."""
        clock = ex.broker.clock
        ended = clock.monotonic()
        now_ms = ex.base_ms + int(ended * 1000)
        rest, resp = "", None
        out: dict[str, Any] = {}
        if parts is None:
            rest = ',"no_response":true'
        elif ex.key is not None:
            resp, text = self._response_fields(ex, parts, out)
            if text is not None:
                rest = ',"fields":' + text
            if "errors" in out:
                rest += ',"errors":' + ENCODE(out["errors"])
            if "throttle_ms" in out:
                rest += ',"throttle_ms":%d' % out["throttle_ms"]
            if "undecodable" in out:
                rest += ',"undecodable":' + quote(out["undecodable"])
        strict = self.strict
        if strict is not None and ex.line is not None:
            line = ex.line
            out = {"time": now_ms, "dir": "response"} | {
                k: line[k] for k in ("broker", "conn", "client_id", "software", "api_key", "api",
                                     "version", "corr") if k in line} | out
            strict.on_response(ex.broker, ex.state, line, ex.req, out, resp)
            if "violations" in out:
                rest += ',"violations":' + ENCODE(out["violations"])
        head, corr, tail = ex.ids
        self.emit('{"time":%d,"dir":"response",%s%s%s,"latency_ms":%r%s}' % (
            now_ms, head, corr, tail, round((ended - ex.started) * 1000, 3), rest))

    def _response_fields(self, ex: _Exchange, parts: list[Any], out: dict[str, Any]
                         ) -> tuple[Any, str | None]:
        """The response (the handler's object, else decoded from `parts`) and its fields as
        JSON; notes errors, throttle (or why it does not decode) in `out`. A body a handler
        answers from its own cache (Metadata's, ApiVersions') is summarised once while kept."""
        key, version = ex.key, ex.version
        handler = ex.broker.handlers.get(key) if key is not None else None
        if handler is None or key is None or version is None:
            return None, None
        body = parts[2] if len(parts) == 3 and type(parts[2]) is bytes else None
        if body is not None:
            seen = self._answers.get(id(body))
            if seen is not None and seen[0] is body and seen[1] == (key, version):
                out.update(seen[3])
                return seen[2], seen[3]["fields"]
        resp, text = self._summarise(ex, handler, key, version, parts, out)
        if body is not None and text is not None:
            if len(self._answers) >= _ANSWERS_KEPT:
                self._answers.clear()
            # the body itself is kept: its id stays its own while the entry lives
            self._answers[id(body)] = (body, (key, version), resp, dict(out))
        return resp, text

    @staticmethod
    def _summarise(ex: _Exchange, handler: Handler, key: int, version: int, parts: list[Any],
                   out: dict[str, Any]) -> tuple[Any, str | None]:
        codes: set[int] = set()
        resp = ex.resp
        text = None
        try:
            if type(resp) is RawResponse:
                if key == 1 and resp.source is not None:    # Fetch: the encoder's arguments
                    text = fetch_json(version, resp.source, codes)
                    if resp.source[0]:
                        out["throttle_ms"] = resp.source[0]
            elif resp is not _UNSEEN and resp is not None:
                text = fields_json(resp, version if key != 18 or resp.error_code == 0 else 0,
                                   codes)
        except Exception:  # noqa: BLE001 — not what was expected: read what was sent
            codes.clear()
        if text is None:
            try:
                resp = decode_response(response_class(handler.request_class),
                                       memoryview(b"".join(parts))[4:], version)
                text = fields_json(resp, version if key != 18 or resp.error_code == 0 else 0,
                                   codes)
            except Exception as e:  # noqa: BLE001 — a trace never breaks serving
                out["undecodable"] = repr(e)
                return None, None
        if codes:
            out["errors"] = {error_name(c): c for c in sorted(codes)}
        throttle = getattr(resp, "throttle_time_ms", 0)
        if throttle and type(throttle) is int:
            out["throttle_ms"] = throttle
        out["fields"] = text
        return resp, text


def attach(brokers: Iterable[Broker], config: ClusterConfig, strict: Strict | None = None
           ) -> Tracer | None:
    """One Tracer for these brokers (a cluster's) when config.trace names a file ("-": stderr,
    else truncated) or strict mode is on; each broker's listener then goes through it."""
    if config.trace is None and strict is None:
        return None
    sink = None if config.trace is None else (
        sys.stderr if config.trace == "-" else open(config.trace, "w", encoding="utf-8"))  # noqa: SIM115
    tracer = Tracer(sink, strict)
    for b in brokers:
        b.services = dataclasses.replace(b.services, tracer=tracer)
        b.handle = handler_for(b.services)
        b.control_handle = handler_for(b.services, control_plane=True)
    return tracer
