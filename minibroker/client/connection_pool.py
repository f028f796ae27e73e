"""Connections of the reference client: one pipelined connection per broker, ApiVersions on connect.

Every broker connection is a `KafkaClientConnection` (many requests in flight, responses in order).
On connect the pool asks ApiVersions (v3, falling back by KIP-511's rule) and keeps the broker's ranges on the
connection, so `version(conn, RequestClass)` picks the highest version both sides speak.
Connections are created lazily: `get_nowait(node)` never blocks the caller (a producer's sender),
it starts a connect in the background and returns None until it is up.

With SASL, a connection whose session has a lifetime (the broker's connections.max.reauth.ms,
KIP-368) re-authenticates on itself before it ends (network/sasl_client.SessionReauth, timed by
the pool's clock and seeded rng). A refused re-authentication fails the requests waiting for it
with AuthenticationFailed and closes the connection. A connect the broker refused
authentication is not a connection failure like the others: `get()` raises AuthenticationFailed
with the broker's message, and `auth_failure(node)` tells the senders.
"""
from __future__ import annotations

import asyncio
import logging
import random
import struct
import zlib
from typing import Any, Callable

from kafka.errors import KafkaConnectionError, NodeNotReadyError, UnsupportedVersionError
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from minibroker.client.security import ClientSecurity
from minibroker.clock import Clock
from minibroker.network.client import ConnectionClosed, KafkaClientConnection
from minibroker.network.sasl_client import AuthenticationFailed, SessionReauth

log = logging.getLogger("minibroker.client")

_I16 = struct.Struct(">h")
_API_VERSIONS_TOP = 3       # the version asked first (v3: KIP-511's client software name)


class ApiVersionsFailed(KafkaConnectionError):
    """The broker's ApiVersions answer could not be decoded at any version tried."""


def _decode_api_versions(body: bytes, version: int) -> dict[int, tuple[int, int]] | None:
    """An ApiVersions response body (after the header, never flexible) decoded at `version`:
    None unless the decode consumes exactly the body (a truncated or mis-versioned one can decode
    "successfully" with short fields)."""
    flexible = ApiVersionsResponse.flexible_version_q(version)
    decode = ApiVersionsResponse._struct.compiled_decode_from(
        version, compact=flexible, tagged=flexible, data_class=ApiVersionsResponse[None])
    try:
        obj, end = decode(memoryview(body), 0)
    except (struct.error, ValueError, IndexError, UnicodeDecodeError):
        return None
    if end != len(body):
        return None
    return {k.api_key: (k.min_version, k.max_version) for k in obj.api_keys}

BOOTSTRAP = -1      # pseudo node ids below this are bootstrap servers: -1, -2, ...


def parse_bootstrap(servers: str | list[str]) -> list[tuple[str, int]]:
    if isinstance(servers, str):
        servers = [s for s in servers.split(",") if s.strip()]
    out = []
    for s in servers:
        host, _, port = s.strip().rpartition(":")
        out.append((host or "127.0.0.1", int(port)))
    if not out:
        raise ValueError("bootstrap_servers is empty")
    return out


class ConnectionPool:
    def __init__(self, bootstrap_servers: str | list[str], client_id: str,
                 request_timeout_ms: int = 30000, reconnect_backoff_ms: int = 50,
                 ssl_context: Any = None, security: ClientSecurity | None = None,
                 clock: Clock | None = None, rng: random.Random | None = None) -> None:
        self.client_id = client_id
        self.clock = clock or Clock()
        # KIP-368's jitter; seeded by the client id by default, so clients differ repeatably
        self.rng = rng or random.Random(zlib.crc32(client_id.encode()))
        # security.protocol SSL / SASL_SSL: every connection uses TLS; SASL_*: and authenticates
        self.security = security
        self.ssl_context = ssl_context if security is None else security.ssl_context()
        self.request_timeout = request_timeout_ms / 1000
        self.reconnect_backoff = reconnect_backoff_ms / 1000
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.addresses: dict[int, tuple[str, int]] = {}     # node id -> (host, port)
        self._conns: dict[int, KafkaClientConnection] = {}
        self._connecting: dict[int, asyncio.Task] = {}
        self._backoff_until: dict[int, float] = {}
        self._why: dict[int, str] = {}                      # node -> why the last connect failed
        self._refused: set[int] = set()                     # ... when the broker refused our SASL
        self._listeners: list[Callable[[], None]] = []
        self._next_bootstrap = 0
        self.closed = False

    # ------------------------------------------------------------------ addressing
    def on_ready(self, fn: Callable[[], None]) -> None:
        """Call `fn()` whenever a connection comes up or fails (senders wake on it)."""
        self._listeners.append(fn)

    def update_addresses(self, brokers: dict[int, tuple[str, int]]) -> None:
        for node, addr in brokers.items():
            old = self.addresses.get(node)
            self.addresses[node] = addr
            if old is not None and old != addr and node in self._conns:
                self._conns.pop(node).close("broker moved")

    def _address(self, node: int) -> tuple[str, int]:
        if node <= BOOTSTRAP:
            return self.bootstrap[(-node - 1) % len(self.bootstrap)]
        return self.addresses[node]

    # ------------------------------------------------------------------ connections
    def connected(self, node: int) -> KafkaClientConnection | None:
        conn = self._conns.get(node)
        if conn is not None and conn.closed:
            self._conns.pop(node, None)
            conn = None
        return conn

    def connect_failed(self, node: int) -> bool:
        """Whether the last attempt to connect to `node` failed (it is backing off)."""
        return node in self._backoff_until

    def get_nowait(self, node: int) -> KafkaClientConnection | None:
        """The live connection to `node`, or None while one is being (re)established."""
        conn = self.connected(node)
        if conn is None and not self.closed and node not in self._connecting:
            loop = asyncio.get_running_loop()
            if loop.time() >= self._backoff_until.get(node, 0.0):
                self._connecting[node] = loop.create_task(self._connect(node))
        return conn

    async def get(self, node: int) -> KafkaClientConnection:
        conn = self.connected(node)
        if conn is not None:
            return conn
        if self.closed:
            raise KafkaConnectionError("client closed")
        task = self._connecting.get(node)
        if task is None:
            delay = self._backoff_until.get(node, 0.0) - asyncio.get_running_loop().time()
            if delay > 0:
                await asyncio.sleep(delay)
            conn = self.connected(node)
            if conn is not None:
                return conn
            task = self._connecting.get(node)
            if task is None:
                task = self._connecting[node] = asyncio.get_running_loop().create_task(
                    self._connect(node))
        conn = await asyncio.shield(task)
        if conn is None:
            refused = self.auth_failure(node)
            if refused is not None:
                raise refused
            host, port = self._address(node)
            who = "bootstrap server" if node <= BOOTSTRAP else f"broker {node}"
            raise KafkaConnectionError(f"cannot reach {who} at {host}:{port} "
                                       f"({self._why.get(node, 'connection failed')})")
        return conn

    async def _connect(self, node: int) -> KafkaClientConnection | None:
        try:
            host, port = self._address(node)
            conn = await KafkaClientConnection.connect(host, port, self.client_id,
                                                      timeout=self.request_timeout,
                                                      ssl=self.ssl_context)
            try:
                conn.api_versions = await self._api_versions(conn)
                if self.security is not None:
                    self._keep_session(conn, await self.security.authenticate(conn))
            except BaseException:
                conn.close()
                raise
            if self.closed:
                conn.close()
                return None
            self._conns[node] = conn
            self._backoff_until.pop(node, None)
            self._refused.discard(node)
            return conn
        except (OSError, ConnectionClosed, asyncio.TimeoutError, KeyError,
                ApiVersionsFailed) as e:
            (log.warning if isinstance(e, (ApiVersionsFailed, AuthenticationFailed)) else log.debug)(
                "connect to node %s failed: %r", node, e)
            self._why[node] = str(e) or (
                f"no connection in {self.request_timeout * 1000:.0f} ms"
                if isinstance(e, asyncio.TimeoutError) else type(e).__name__)
            if isinstance(e, AuthenticationFailed):
                self._refused.add(node)
            else:
                self._refused.discard(node)
            self._backoff_until[node] = asyncio.get_running_loop().time() + self.reconnect_backoff
            return None
        finally:
            self._connecting.pop(node, None)
            for fn in self._listeners:
                fn()

    def _keep_session(self, conn: KafkaClientConnection, lifetime_ms: int) -> None:
        """KIP-368: a session with a lifetime is renewed on the connection before it ends."""
        if lifetime_ms > 0 and self.security is not None:
            conn.reauth = reauth = SessionReauth(self.security.authenticate,
                                                 self.clock.monotonic, self.rng)
            reauth.schedule(lifetime_ms)

    def auth_failure(self, node: int) -> AuthenticationFailed | None:
        """The broker's refusal when the last connect to `node` failed authentication."""
        if node not in self._refused:
            return None
        return AuthenticationFailed(self._why.get(node, "authentication failed"))

    async def _api_versions(self, conn: KafkaClientConnection) -> dict[int, tuple[int, int]]:
        """The broker's version ranges, by KIP-511's rule: a broker that does not speak our
        ApiVersions version answers UNSUPPORTED_VERSION at v0 (some, librdkafka's mock cluster,
        in a shape no version decodes); retry at the highest version it lists, else at v0."""
        version = _API_VERSIONS_TOP
        for _ in range(3):
            body = await self._api_versions_body(conn, version)
            error = _I16.unpack_from(body, 0)[0] if len(body) >= 2 else None
            if error == 0:
                ranges = _decode_api_versions(body, version)
                if ranges is not None:
                    return ranges
            elif error == UnsupportedVersionError.errno and version > 0:
                listed = _decode_api_versions(body, 0) or {}
                top = listed.get(ApiVersionsRequest.API_KEY, (0, 0))[1]
                version = top if top < version else 0
                continue
            break
        raise ApiVersionsFailed(f"no usable ApiVersions answer at v{version} "
                                f"(body {bytes(body[:16]).hex()}…)")

    async def _api_versions_body(self, conn: KafkaClientConnection, version: int) -> bytes:
        req = (ApiVersionsRequest(client_software_name="minibroker-client",
                                  client_software_version="0.1") if version >= 3
               else ApiVersionsRequest())
        fut = conn.send(req, version, response_class=ApiVersionsResponse, raw=True)
        try:
            return bytes(await asyncio.wait_for(fut, self.request_timeout))
        except asyncio.TimeoutError:
            conn.close("ApiVersions timed out")
            raise

    async def any_connection(self, prefer: list[int] | None = None) -> tuple[int, KafkaClientConnection]:
        """A connection to some live broker: a known one first, then the bootstrap list."""
        for node in prefer or []:
            conn = self.connected(node)
            if conn is not None:
                return node, conn
        for node in sorted(self._conns):
            conn = self.connected(node)
            if conn is not None:
                return node, conn
        candidates = list(prefer or []) + sorted(self.addresses) + \
            [BOOTSTRAP - i for i in range(len(self.bootstrap))]
        last: Exception | None = None
        for node in candidates:
            try:
                return node, await self.get(node)
            except (KafkaConnectionError, KeyError) as e:
                last = e
        raise NodeNotReadyError(f"no broker reachable ({last!r})")

    def close_node(self, node: int, reason: str) -> None:
        conn = self._conns.pop(node, None)
        if conn is not None:
            conn.close(reason)

    def close(self) -> None:
        self.closed = True
        for task in self._connecting.values():
            task.cancel()
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    # ------------------------------------------------------------------ requests
    @staticmethod
    def version(conn: KafkaClientConnection, cls: Any, lo: int = 0, hi: int | None = None) -> int:
        """Highest version of `cls` both the broker and kafka-python (and the caller) support."""
        key = cls.API_KEY
        ranges = getattr(conn, "api_versions", {})
        if key not in ranges:
            raise UnsupportedVersionError(f"broker does not support api key {key}")
        blo, bhi = ranges[key]
        top = min(bhi, cls.max_version, hi if hi is not None else bhi)
        bottom = max(blo, cls.min_version, lo)
        if top < bottom:
            raise UnsupportedVersionError(
                f"no common version for {cls.__name__}: broker {blo}-{bhi}, client {bottom}-{top}")
        return top

    async def request(self, node: int, req: Any, lo: int = 0, hi: int | None = None,
                      response_class: Any = None, timeout: float | None = None) -> Any:
        conn = await self.get(node)
        version = self.version(conn, type(req), lo, hi)
        return await conn.request(req, version, timeout=timeout or self.request_timeout,
                                  response_class=response_class)
