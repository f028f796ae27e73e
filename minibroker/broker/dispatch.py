"""Request routing: the single registration point for handlers, which also feeds ApiVersions.

A frame arrives from network/; we peek api key and version, find the handler registered with
`@handles`, decode (checking the decode consumed the whole frame), run the fault hooks, then the
handler, and encode the response. Malformed input raises ProtocolViolation, which closes only
that connection. `handler_for(services)` is the `handle(conn, frame)` callable a listener
(network/tcp.py, network/memory.py) is given; the handler modules register themselves when
minibroker.services.handlers is imported (broker.py does), in key order.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

from kafka.errors import KafkaError, UnsupportedVersionError
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata import ApiVersionsResponse

from minibroker.broker.authorization import check_request
from minibroker.broker.context import (
    Connection, Handler, RequestContext, RequestObserver, Services, context_class)
from minibroker.protocol.framing import (
    API_PREFIX, ProtocolViolation, frame_parts, parse_request_header, response_header)
from minibroker.protocol.nulls import first_null

log = logging.getLogger("minibroker.dispatch")


HANDLERS: dict[int, Handler] = {}
HandlerFn = TypeVar("HandlerFn", bound=Callable[..., Awaitable[Any]])
# A framed response as the buffers a transport writes out (bytes, memoryviews of stored batches).
Parts = list[Any]


def _api_name(api_key: int, request_class: Any) -> str:
    """Kafka's name of the API (ApiKeys), else the request class's (our own keys)."""
    try:
        return str(ApiKey(api_key).name)
    except ValueError:
        return str(request_class.__name__).removesuffix("Request")


def handles(api_key: int, request_class: Any, versions: tuple[int, int], raw: bool = False
            ) -> Callable[[HandlerFn], HandlerFn]:
    """Register a handler. raw=True: it receives the undecoded body (a memoryview of the frame) and
    must reject malformed input with ProtocolViolation itself (hand-rolled hot-path decoders)."""
    lo, hi = versions
    assert 0 <= lo <= hi <= request_class.max_version, (request_class, versions)

    def register(fn: HandlerFn) -> HandlerFn:
        assert int(api_key) not in HANDLERS, f"api key {api_key} registered twice"
        flexible = [v for v in range(lo, hi + 1) if request_class.flexible_version_q(v)]
        if int(api_key) == 18:
            flexible = list(range(3, hi + 1))     # ApiVersions v3+ (its header stays v0 in responses)
        HANDLERS[int(api_key)] = Handler(int(api_key), request_class, (lo, hi), fn,
                                         _api_name(int(api_key), request_class), raw,
                                         flexible[0] if flexible else 1 << 15)
        return fn
    return register


# Sent only by the controller (KIP-291): served on each broker's control-plane listener, which
# Metadata never advertises, and neither served nor listed by ApiVersions on client listeners (as
# in Kafka 4). From any client they deleted acknowledged data or redirected every client.
INTER_BROKER_KEYS = frozenset({4, 5, 6})      # LeaderAndIsr, StopReplica, UpdateMetadata


def supported_versions(control_plane: bool = False, handlers: dict[int, Handler] | None = None
                       ) -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every API served on a client listener (or, control_plane=True, on
    the control-plane one), sorted by key — the ApiVersions table. `handlers`: a broker's table
    (an emulated Kafka release's, minibroker.broker.releases), default every registered API."""
    return [(k, h.versions[0], h.versions[1])
            for k, h in sorted((HANDLERS if handlers is None else handlers).items())
            if (control_plane or k not in INTER_BROKER_KEYS) and h.advertised]


class RawResponse:
    """A response already encoded as a list of buffers (fast paths: Fetch, Produce). `source`:
    what the encoder was given, if the trace can summarise that instead of decoding the bytes
    (Fetch's: broker/trace_json.fetch_json)."""
    __slots__ = ("parts", "source")

    def __init__(self, parts: Parts, source: tuple[Any, ...] | None = None) -> None:
        self.parts = parts
        self.source = source


def decode_exact(cls: Any, data: memoryview, version: int) -> Any:
    """Decode `data` as `cls` at `version`. A decode that fails or runs past the frame (a
    truncated request) is a bad frame. Bytes left over after a complete decode are tolerated,
    as Kafka does (it never checks that a body was consumed): librdkafka 2.16's admin client
    sends Metadata v13 with an extra field and tag section that Kafka leaves unread."""
    flexible = cls.flexible_version_q(version)
    decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible,
                                              data_class=cls[None])
    try:
        obj, pos = decode(data, 0)
    except Exception as e:  # noqa: BLE001 — any decoder failure is the client's malformed input
        raise ProtocolViolation(f"cannot decode {cls.__name__} v{version}: {e!r}") from None
    if pos > len(data):
        raise ProtocolViolation(
            f"{cls.__name__} v{version}: needs {pos} bytes, the frame has {len(data)} (truncated)")
    if pos < len(data):
        log.debug("%s v%d: %d trailing bytes ignored", cls.__name__, version, len(data) - pos)
    obj._version = version
    return obj


def encode_response(resp: Any, version: int, correlation_id: int) -> Parts:
    if isinstance(resp, RawResponse):
        return resp.parts
    flexible_hdr = resp.flexible_version_q(version) and resp.API_KEY != 18
    body = resp.encode(version=version)
    return frame_parts([response_header(correlation_id, flexible_hdr), body])


def api_versions_response(error_code: int, control_plane: bool = False,
                          handlers: dict[int, Handler] | None = None) -> ApiVersionsResponse:
    """ApiVersions' answer: the version range of every API this listener serves (k18)."""
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, lo, hi in supported_versions(control_plane, handlers)]
    return ApiVersionsResponse(error_code=error_code, api_keys=keys, throttle_time_ms=0)


def unsupported_version_response(correlation_id: int,
                                 handlers: dict[int, Handler] | None = None) -> Parts:
    """An ApiVersions request of a version we lack is answered at v0 with the error (KIP-511)."""
    return encode_response(api_versions_response(UnsupportedVersionError.errno, False, handlers),
                           0, correlation_id)


def _malformed(handler: Handler, decoded: Any, api_version: int) -> ProtocolViolation | None:
    """A null where the schema allows none, which reached the handler (the generic decoder reads
    any -1 length as None): the client's malformed input, closed with one log line. Looked for
    only after a failure: walking every request costs more than decoding."""
    where = first_null(handler.request_class._struct, decoded, api_version)
    if where is None:
        return None
    return ProtocolViolation(f"{handler.name} v{api_version}: null {where}, which is not nullable")


def _authorize(ctx: RequestContext, handler: Handler, req: Any) -> tuple[Any, Any]:
    """KIP-11: a denied request is answered here; denied items leave the request."""
    try:
        return check_request(ctx, handler.api_key, req)
    except Exception:
        err = _malformed(handler, req, ctx.api_version)
        if err is None:
            raise
        raise err from None


async def dispatch(services: Services, context: type[RequestContext], conn: Connection,
                   frame: memoryview, control_plane: bool = False,
                   observer: RequestObserver | None = None) -> Parts | None:
    """Handle one request frame; returns the framed response buffers, or None for no response.
    `context`: the broker's RequestContext class (context_class(services)). control_plane: the
    frame came to the broker's control-plane listener. observer: the protocol trace's (given only
    by broker/trace.py), shown the request as decoded here and the response before encoding."""
    if len(frame) < 8:
        raise ProtocolViolation(f"request of {len(frame)} bytes is shorter than a header")
    if not services.node.running:
        # A connection accepted while the broker stopped: a stopped broker answers nothing
        # (its metadata may still name itself as the controller).
        raise ProtocolViolation("the broker is stopped")
    api_key, api_version, corr = API_PREFIX.unpack_from(frame, 0)
    handler = services.handlers.get(api_key)     # HANDLERS, or an emulated release's subset
    if handler is None:
        raise ProtocolViolation(f"unknown api key {api_key}")
    if api_key in INTER_BROKER_KEYS and not control_plane:
        raise ProtocolViolation(f"{handler.name} (key {api_key}) is served on the control-plane "
                                "listener only")
    lo, hi = handler.versions
    if not lo <= api_version <= hi:
        if api_key == 18:  # ApiVersions: answer v0 with the error and our ranges (KIP-511)
            return unsupported_version_response(corr, services.handlers)
        raise ProtocolViolation(f"unsupported version {api_version} of {handler.name} "
                                f"(supported {lo}-{hi})")
    cls = handler.request_class
    clock = services.clock
    started = clock.monotonic()
    header = parse_request_header(frame, api_version >= handler.flexible_from)
    ctx = context(services, header, api_version, conn, frame, control_plane,
                  conn.principal, conn.listener)
    faults = services.faults
    resp: Any = None
    if handler.raw:
        req = frame[header.body_offset:]
    else:
        req = decode_exact(cls, frame[header.body_offset:], api_version)
    if observer is not None:        # before the handler: a raw one may patch the frame in place
        req = observer.request(handler, header, req)    # Produce's: the body decoded, once
    if faults.armed:
        # Fault hooks see the decoded request, as for every other API (decoded only when armed).
        resp = await faults.intercept(api_key, decode_exact(
            cls, frame[header.body_offset:], api_version) if handler.raw else req, ctx)
    complete = None
    if resp is None and services.authorizer is not None and not handler.raw:
        resp, complete = _authorize(ctx, handler, req)
    if resp is None:
        coro = handler.fn(ctx, req)
        # Only the handler refers to the frame now: one that waits may let it go (ctx.frame =
        # None), so the network layer can reuse the receive buffer behind it.
        decoded = None if handler.raw else req
        del frame, req
        try:
            resp = await coro
        except (ProtocolViolation, KafkaError, asyncio.CancelledError):
            raise
        except Exception:
            err = None if decoded is None else _malformed(handler, decoded, api_version)
            if err is None:
                raise
            raise err from None
        if complete is not None:
            resp = complete(resp)
    if observer is not None:
        observer.response(resp)
    if resp is not None and type(resp) is not RawResponse:
        resp = encode_response(resp, api_version, corr)
    if faults.armed and faults.latency_ms:      # a slow broker (Faults.set_latency)
        await faults.delay_response(services.node_id, api_key)
    elapsed = clock.monotonic() - started
    services.stats.request_done(api_key, elapsed)
    if log.isEnabledFor(logging.DEBUG):
        log.debug("broker %d: %s v%d from client %s, correlation id %d: %.1f ms", services.node_id,
                  handler.name, api_version, header.client_id, corr, elapsed * 1000)
    if resp is None:
        return None
    return cast(Parts, resp.parts if type(resp) is RawResponse else resp)


def handler_for(services: Services, control_plane: bool = False
                ) -> Callable[[Connection, memoryview], Coroutine[Any, Any, Parts | None]]:
    """The `handle(conn, frame)` a listener calls per request frame (a C-level partial: no extra
    Python frame per request): a coroutine, as network/tcp.py's Handle (it becomes a task)."""
    context = context_class(services)
    if control_plane:
        return functools.partial(dispatch, services, context, control_plane=True)
    if services.tracer is not None:     # serve --trace/--strict: each exchange (broker/trace.py)
        return functools.partial(services.tracer.dispatch, dispatch, services, context)
    return functools.partial(dispatch, services, context)
