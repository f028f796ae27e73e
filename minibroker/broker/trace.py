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
tracer. Produce requests are summarised from their raw bytes (protocol.fast, no copy of the
records) before the handler runs (it may patch the batch headers in place and keep the frame).
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import json.encoder
import keyword
import struct
import sys
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TextIO, cast

from kafka.errors import for_code
from kafka.protocol.api_message import ResponseClassRegistry

from minibroker.broker.dispatch import HANDLERS, decode_exact, handler_for
from minibroker.protocol.fast import decode_produce
from minibroker.protocol.framing import API_PREFIX, ProtocolViolation, parse_request_header
from minibroker.network.client import decode_response

if TYPE_CHECKING:
    from minibroker.broker.broker import Broker
    from minibroker.broker.context import Connection, RequestContext, Services
    from minibroker.broker.strict import Strict
    from minibroker.config import ClusterConfig

# base offset, length, partition leader epoch, magic, crc, attributes, last offset delta,
# first timestamp, max timestamp, producer id, producer epoch, base sequence, record count
_BATCH = struct.Struct(">qiibIhiqqqhii")
_HEAD = struct.Struct(">qiib")
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_CODEC_OF = CODECS + (5, 6, 7)          # attributes & 7 → its name, else the number
_HEX_UP_TO = 64
_ENCODE = json.JSONEncoder(separators=(",", ":"), check_circular=False, default=repr).encode
try:    # the same encoder without JSONEncoder.encode's per-call set-up (a C encoder made each time)
    _C_ENCODE = json.encoder.c_make_encoder(  # type: ignore[attr-defined]
        None, repr, json.encoder.encode_basestring_ascii, None, ":", ",", False, False, True)
    _C_ENCODE({"k": [1.5, None, "v"]}, 0)
except Exception:  # noqa: BLE001 — no C accelerator (or another signature): JSONEncoder's own
    _C_ENCODE = None


def batches(records: Any) -> list[dict[str, Any]]:
    """Summaries of the record batches in a record set (magic 2; older formats by size only)."""
    buf = memoryview(records).cast("B") if not isinstance(records, memoryview) else records
    out: list[dict[str, Any]] = []
    pos, end = 0, len(buf)
    whole, head = _BATCH.unpack_from, _HEAD.unpack_from
    while pos + 17 <= end:
        if pos + _BATCH.size <= end:     # one unpack for the whole header (most batches)
            (base_offset, length, _epoch, magic, _, attrs, _delta, _, _, pid, pepoch, seq,
             count) = whole(buf, pos)
        else:
            base_offset, length, _epoch, magic = head(buf, pos)
        size = 12 + length
        if magic != 2 or pos + _BATCH.size > end:
            out.append({"base_offset": base_offset, "magic": magic, "size": size})
        else:
            out.append({"base_offset": base_offset, "count": count, "producer_id": pid,
                        "producer_epoch": pepoch, "base_sequence": seq,
                        "codec": _CODEC_OF[attrs & 7],
                        "transactional": bool(attrs & 0x10), "control": bool(attrs & 0x20),
                        "size": size})
        pos += size
    if pos < end:
        out.append({"partial": end - pos})      # a fetch may end in a partial batch
    return out


def _scalar(value: Any, key: str) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        if key == "records":
            return batches(value)
        n = len(value) if not isinstance(value, memoryview) else value.nbytes
        return bytes(value).hex() if n <= _HEX_UP_TO else {"bytes": n}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_scalar(v, key) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


_PLANS: dict[tuple[int, int], list[tuple[str, int, bool]]] = {}
_PLAIN = frozenset({int, str, bool, float})


def _plan(struct: Any, version: int) -> list[tuple[str, int, bool]]:
    """(field name, 0 plain / 1 struct / 2 struct array, is an error code) of the fields of
    `struct` present at `version`: worked out once per message version."""
    key = (id(struct), version)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _PLANS[key] = [
            (f.name, 1 if f.is_struct() else 2 if f.is_struct_array() else 0,
             f.name.endswith("error_code"))
            for f in struct._fields if f.for_version_q(version)]
    return plan


def fields(obj: Any, version: int, errors: set[int]) -> dict[str, Any]:
    """A decoded message as JSON-ready dicts (record sets summarised, bytes shortened), adding
    each non-zero error code met to `errors`."""
    schema = obj._struct
    walk = _WALKS.get((id(schema), version)) or _walk(schema, version)
    return walk(obj, errors)


# a generated walk: (message, errors met) -> its fields
Walk = Callable[[Any, set[int]], dict[str, Any]]
_WALKS: dict[tuple[int, int], Walk] = {}


def _walk(schema: Any, version: int) -> Walk:
    """fields() for one message version as one generated dict display: no per-field loop,
    branch on the field's kind or getattr (the walk was most of the trace's cost after JSON)."""
    items: list[str] = []
    for name, kind, is_error in _plan(schema, version):
        get = (f"o.{name}" if name.isidentifier() and not keyword.iskeyword(name)
               else f"getattr(o, {name!r})")
        if kind == 1:
            value = f"None if (v := {get}) is None else F(v, {version}, errors)"
        elif kind == 2:
            value = f"None if (v := {get}) is None else [F(x, {version}, errors) for x in v]"
        elif is_error:      # a non-zero code is also noted in `errors`
            value = (f"v if (v := {get}) is None or (type(v) in P and (not v or errors.add(v) "
                     f"or True)) else S(v, {name!r})")
        else:
            value = f"v if (v := {get}) is None or type(v) in P else S(v, {name!r})"
        items.append(f"{name!r}: ({value})")
    code = "def walk(o, errors):\n    return {" + ", ".join(items) + "}\n"
    scope = {"P": _PLAIN, "S": _scalar, "F": fields}
    exec(compile(code, f"<trace fields {schema.__class__.__name__} v{version}>", "exec"), scope)
    walk = _WALKS[(id(schema), version)] = cast(Walk, scope["walk"])
    return walk


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


def produce_fields(body: memoryview, version: int) -> dict[str, Any]:
    view = decode_produce(body, version)
    return {"transactional_id": view.transactional_id, "acks": view.acks,
            "timeout_ms": view.timeout_ms,
            "topic_data": [{"name": t.name, "partition_data": [
                {"index": p.index, "records": None if p.records is None else batches(p.records)}
                for p in t.partitions]} for t in view.topics]}


_ID_KEYS = ("broker", "conn", "client_id", "software", "api_key", "api", "version", "corr")


class _Conn:
    """What the tracer (and strict mode) remember of one client connection."""
    __slots__ = ("id", "software_name", "software_version", "negotiated", "in_flight",
                 "throttled_until", "member_id_required", "spoke", "__weakref__")

    def __init__(self, conn_id: int) -> None:
        self.id = conn_id
        self.software_name: str | None = None                        # ApiVersions v3+ (KIP-511)
        self.software_version: str | None = None
        self.negotiated: dict[int, tuple[int, int]] | None = None   # its ApiVersions answer
        self.in_flight: set[int] = set()                             # correlation ids
        self.throttled_until = 0.0                                   # monotonic s (KIP-219)
        self.member_id_required: dict[str, str] = {}                 # group → member id given
        self.spoke = False                                           # its first request seen


class Tracer:
    """Observes every request and response of the brokers given it (`attach`): writes the trace
    lines to `sink` (a text stream, a callable taking one line, or None: no trace) and hands
    each exchange to strict mode's checks (`strict`, minibroker.broker.strict), if on."""

    def __init__(self, sink: TextIO | Callable[[str], None] | None, strict: Strict | None = None
                 ) -> None:
        # (mypy does not narrow a union by hasattr)
        self.stream = cast("TextIO | None", sink if hasattr(sink, "write") else None)
        self._write = self._to(self.stream) if self.stream is not None \
            else cast("Callable[[str], None] | None", sink)
        self.strict = strict
        self._conns: weakref.WeakKeyDictionary[Connection, _Conn] = weakref.WeakKeyDictionary()
        self._next_conn = 0

    def _to(self, stream: TextIO) -> Callable[[str], None]:
        """Lines are flushed once per event-loop turn (not per line: a write call each)."""
        self._flush_armed = False

        def flush() -> None:
            self._flush_armed = False
            if not stream.closed:
                stream.flush()

        def write(line: str) -> None:
            stream.write(line + "\n")
            if not self._flush_armed:
                self._flush_armed = True
                try:
                    asyncio.get_running_loop().call_soon(flush)
                except RuntimeError:        # no loop: at once
                    flush()
        return write

    def close(self) -> None:
        if self.stream is not None and self.stream is not sys.stderr:
            self.stream.close()

    def conn_state(self, conn: Connection) -> _Conn:
        state = self._conns.get(conn)
        if state is None:
            self._next_conn += 1
            state = self._conns[conn] = _Conn(self._next_conn)
        return state

    def emit(self, record: dict[str, Any]) -> None:
        if self._write is not None:
            self._write("".join(_C_ENCODE(record, 0)) if _C_ENCODE is not None
                        else _ENCODE(record))

    async def dispatch(self, dispatch: Callable[..., Awaitable[list[Any] | None]],
                       broker: Services, context: type[RequestContext], conn: Connection,
                       frame: memoryview) -> list[Any] | None:
        """dispatch(services, context, conn, frame), with its request and response traced and
        checked. `broker`: the broker's Services."""
        clock = broker.clock
        started = clock.monotonic()
        base_ms = clock.wall_base_ms      # now_ms() is base + monotonic ms: read the clock once
        state = self.conn_state(conn)
        line, req = self.request_line(broker, state, frame, base_ms + int(started * 1000))
        strict = self.strict
        if strict is not None:
            strict.on_request(broker, state, line, req, frame)
        self.emit(line)
        key, version = line.get("api_key"), line.get("version")
        coro = dispatch(broker, context, conn, frame)
        del frame       # the handler may let the frame go while it waits (dispatch.py)
        try:
            parts = await coro
        except ProtocolViolation as e:
            state.in_flight.discard(line.get("corr"))
            self.emit(self._ids(line, "closed", clock.now_ms()) | {"reason": str(e)})
            raise
        ended = clock.monotonic()
        out = self._ids(line, "response", base_ms + int(ended * 1000))
        out["latency_ms"] = round((ended - started) * 1000, 3)
        resp = None
        if parts is None:
            out["no_response"] = True
        else:
            resp = self.response_fields(key, version, parts, out)
        if strict is not None:
            strict.on_response(broker, state, line, req, out, resp)
        self.emit(out)
        return parts

    @staticmethod
    def _ids(line: dict[str, Any], kind: str, now_ms: int) -> dict[str, Any]:
        out: dict[str, Any] = {"time": now_ms, "dir": kind}
        for k in _ID_KEYS:
            if k in line:
                out[k] = line[k]
        return out

    def request_line(self, broker: Services, state: _Conn, frame: memoryview, now_ms: int
                     ) -> tuple[dict[str, Any], Any]:
        """The request's trace line, and the decoded request (Produce: its summary) or None."""
        req: Any = None
        line: dict[str, Any] = {"time": now_ms, "dir": "request", "broker": broker.node_id,
                      "conn": state.id}
        if len(frame) < 8:
            return line, req
        key, version, corr = API_PREFIX.unpack_from(frame, 0)
        handler = broker.handlers.get(key)
        line.update(api_key=key, api=handler.name if handler else str(key), version=version,
                    corr=corr)
        if handler is None:
            return line, req
        try:
            # The client id reads the same in header v1 and v2 (v2 appends tagged fields).
            header = parse_request_header(frame, False)
            line["client_id"] = header.client_id
            if not handler.versions[0] <= version <= handler.versions[1]:
                return line, req            # closed by dispatch; the header named the client
            if version >= handler.flexible_from:
                header = parse_request_header(frame, True)
            body = frame[header.body_offset:]
            if key == 0:
                req = line["fields"] = produce_fields(body, version)
            else:
                req = decode_exact(handler.request_class, body, version)
                line["fields"] = fields(req, version, set())
                if key == 18 and version >= 3:
                    state.software_name = req.client_software_name
                    state.software_version = req.client_software_version
        except (ProtocolViolation, ValueError, struct.error) as e:
            line["undecodable"] = str(e)
        if state.software_name is not None:
            line["software"] = f"{state.software_name}/{state.software_version}"
        return line, req

    def response_fields(self, key: int | None, version: int | None, parts: list[Any],
                        out: dict[str, Any]) -> Any:
        """Adds the response's fields, error names and throttle to `out`; returns it decoded."""
        handler = HANDLERS.get(key) if key is not None else None
        if handler is None or version is None:      # no response without a request header
            return None
        data = memoryview(b"".join(parts))[4:]      # after the size prefix
        try:
            resp = decode_response(response_class(handler.request_class), data, version)
        except Exception as e:  # noqa: BLE001 — a trace never breaks serving
            out["undecodable"] = repr(e)
            return None
        codes: set[int] = set()
        out["fields"] = decoded = fields(resp, version if key != 18 or resp.error_code == 0
                                         else 0, codes)
        if codes:
            out["errors"] = {error_name(c): c for c in sorted(codes)}
        if decoded.get("throttle_time_ms"):
            out["throttle_ms"] = decoded["throttle_time_ms"]
        return resp


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
