"""The TLS transport (network/ssl_transport.py) over a socket pair, on asyncio's event loop and
uvloop's: a response of small and large parts written while the peer reads nothing (the write
waits for room, retries the same chunk and pauses the protocol), reading paused and resumed,
both ways of closing; and the OpenSSL tuning of network/tls.py (read-ahead, AES-128-GCM first)."""
from __future__ import annotations

import asyncio
import socket
import ssl

import pytest
import uvloop

from minibroker.config import ClusterConfig
from minibroker.network.ssl_transport import accept_tls
from minibroker.network.tls import TlsConfigError, _libssl_ctx, server_context, tune
from minibroker.security.certs import tls_settings

pytestmark = pytest.mark.real_time
LOOPS = pytest.mark.parametrize("loop_factory", [asyncio.new_event_loop, uvloop.new_event_loop],
                                ids=["asyncio", "uvloop"])


class Sink(asyncio.BufferedProtocol):
    """Records what arrives and the flow-control calls."""

    def __init__(self) -> None:
        self.buf = bytearray(1 << 16)
        self.got = bytearray()
        self.updates = 0
        self.pause_after = None         # pause reading after this many buffer_updated calls
        self.transport = None
        self.paused = self.resumed = 0
        self.eof = False
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self.buf)

    def buffer_updated(self, nbytes: int) -> None:
        self.got += self.buf[:nbytes]
        self.updates += 1
        if self.updates == self.pause_after:
            self.transport.pause_reading()

    def eof_received(self) -> None:
        self.eof = True

    def pause_writing(self) -> None:
        self.paused += 1

    def resume_writing(self) -> None:
        self.resumed += 1

    def connection_lost(self, exc) -> None:
        self.lost.set_result(exc)


async def connected(d, **config):
    """(server transport, its Sink, client reader, client writer) over a socket pair."""
    server_sock, client_sock = socket.socketpair()
    ctx = server_context(ClusterConfig(**tls_settings(d), **config))
    accepting = asyncio.ensure_future(
        accept_tls(asyncio.get_running_loop(), server_sock, ctx, Sink, 10.0))
    reader, writer = await asyncio.wait_for(asyncio.open_connection(
        sock=client_sock, ssl=ssl.create_default_context(cafile=str(d / "ca.pem")),
        server_hostname="localhost"), 10)
    transport = await asyncio.wait_for(accepting, 10)
    return transport, transport.get_protocol(), reader, writer


async def until(predicate, what: str) -> None:
    for _ in range(1000):               # bounded: 10 s
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def large_response_to_a_slow_reader(d) -> None:
    transport, sink, reader, writer = await connected(d)
    big = bytes(range(256)) * (8 * 4096)                   # 8 MiB: more than the socket takes
    parts = [b"head", memoryview(big)[:3 << 20], b"x" * 100, b"y" * 20,
             memoryview(big)[3 << 20:], b"tail"]
    transport.writelines(parts)
    assert sink.paused == 1 and transport.get_write_buffer_size() > 0   # waiting for room
    assert await asyncio.wait_for(reader.readexactly(len(b"".join(parts))), 30) == b"".join(parts)
    await until(lambda: sink.resumed == 1, "resume_writing")
    assert transport.get_write_buffer_size() == 0
    transport.close()                                       # close_notify, then EOF
    assert await asyncio.wait_for(reader.read(), 10) == b""
    assert await asyncio.wait_for(sink.lost, 10) is None
    writer.close()


async def paused_reading_and_peer_close(d) -> None:
    transport, sink, reader, writer = await connected(d)
    sink.pause_after = 1
    data = bytes(range(251)) * 4000                         # ~1 MB: many records
    writer.write(data)
    await until(lambda: sink.updates == 1, "the first read")
    assert not transport.is_reading()
    transport.resume_reading()
    await until(lambda: len(sink.got) == len(data), "all of it")
    assert bytes(sink.got) == data
    writer.close()                                          # the peer closes: EOF, then lost
    assert await asyncio.wait_for(sink.lost, 10) is None
    assert sink.eof


@LOOPS
@pytest.mark.parametrize("case", [large_response_to_a_slow_reader, paused_reading_and_peer_close])
def test_ssl_transport(tmp_path, loop_factory, case):
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(case(tmp_path))


def test_tuning_reaches_openssl_and_prefers_aes_128_gcm(tmp_path):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    assert tune(ctx)
    lib, ptr = _libssl_ctx(ctx)
    assert lib.SSL_CTX_ctrl(ptr, 40, 0, None) == 1         # SSL_CTX_get_read_ahead

    # A client offering OpenSSL's defaults (AES-256-GCM first) gets the server's first choice.
    assert asyncio.run(negotiated(tmp_path)) == ("TLS_AES_128_GCM_SHA256", "TLSv1.3")


async def negotiated(d, **config) -> tuple[str, str]:
    transport, _, _, writer = await connected(d, **config)
    name, version, _ = transport.get_extra_info("cipher")
    transport.abort()
    writer.close()
    return name, version


@pytest.mark.parametrize("suites, expected", [
    ("TLS_AES_256_GCM_SHA384", ("TLS_AES_256_GCM_SHA384", "TLSv1.3")),
    (" TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 ", ("ECDHE-ECDSA-AES256-GCM-SHA384", "TLSv1.2")),
    ("TLS_CHACHA20_POLY1305_SHA256,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
     ("TLS_CHACHA20_POLY1305_SHA256", "TLSv1.3")),
])
def test_ssl_cipher_suites_is_honoured(tmp_path, suites, expected):
    assert asyncio.run(negotiated(tmp_path, ssl_cipher_suites=suites)) == expected


@pytest.mark.parametrize("suites, enabled", [("TLS_NO_SUCH_SUITE", "TLSv1.2,TLSv1.3"),
                                             ("TLS_AES_128_GCM_SHA256", "TLSv1.2")])
def test_ssl_cipher_suites_without_a_usable_suite_is_refused(tmp_path, suites, enabled):
    with pytest.raises(TlsConfigError):
        server_context(ClusterConfig(**tls_settings(tmp_path), ssl_cipher_suites=suites,
                                     ssl_enabled_protocols=enabled))
