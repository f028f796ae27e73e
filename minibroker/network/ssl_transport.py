"""An SSL or SASL_SSL connection's transport (Kafka's SslTransportLayer): OpenSSL reads and writes
the socket itself (ssl.SSLSocket, non-blocking), driven by the event loop's add_reader/add_writer.

asyncio's and uvloop's SSL transports run OpenSSL over memory BIOs: every byte is copied into the
incoming BIO (which zeroes its room first), out of it into OpenSSL's record buffer, and on the way
out into the outgoing BIO and again into a bytes object before the socket write. On 10 KiB
records that was ~25% of the broker's CPU over TLS (benchmarks/tls_cost.py, docs/security.md).
Here OpenSSL decrypts straight from its record buffer into the FrameReader's buffer and encrypts
a response's stored batches (memoryview slices) straight into its record buffer for the socket.

Writes: the small parts of a response are joined (one TLS record rather than one each), large
parts are handed to SSL_write as they are. OpenSSL writes one record (16 KiB) per send(), so a
multi-record write is corked (TCP_CORK) and the kernel still sends full segments.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
from typing import Any, Callable, Iterable

# What the transport is handed to write: bytes, bytearrays and memoryviews (a response's parts).
Part = bytes | bytearray | memoryview

log = logging.getLogger("minibroker.network")

# Parts below this are joined with their neighbours: one TLS record carries at most 16 KiB.
JOIN_BELOW = 16 * 1024
# Receives per readable event before yielding to the loop (a fast sender cannot starve others).
READS_PER_EVENT = 64
HIGH_WATER, LOW_WATER = 64 * 1024, 16 * 1024      # asyncio's transport defaults
TCP_CORK = getattr(socket, "TCP_CORK", None)
_AGAIN = (ssl.SSLWantReadError, ssl.SSLWantWriteError)


async def accept_tls(loop: asyncio.AbstractEventLoop, sock: socket.socket,
                     context: ssl.SSLContext, factory: Callable[[], asyncio.BufferedProtocol],
                     timeout: float) -> "SslTransportLayer":
    """Run the server handshake on an accepted socket, then start `factory()`'s protocol on it."""
    sock.setblocking(False)
    sslsock = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
    try:
        await asyncio.wait_for(_handshake(loop, sslsock), timeout)
    except BaseException:
        sslsock.close()
        raise
    return SslTransportLayer(loop, sslsock, factory())


async def _handshake(loop: asyncio.AbstractEventLoop, sslsock: ssl.SSLSocket) -> None:
    fd = sslsock.fileno()
    while True:
        try:
            sslsock.do_handshake()
            return
        except ssl.SSLWantReadError:
            add, remove = loop.add_reader, loop.remove_reader
        except ssl.SSLWantWriteError:
            add, remove = loop.add_writer, loop.remove_writer
        ready: asyncio.Future[None] = loop.create_future()

        def wake(ready: asyncio.Future[None] = ready) -> None:
            if not ready.done():
                ready.set_result(None)
        add(fd, wake)
        try:
            await ready
        finally:
            remove(fd)


class SslTransportLayer(asyncio.Transport):
    """asyncio.Transport for a BufferedProtocol over a handshaken non-blocking SSLSocket."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sslsock: ssl.SSLSocket,
                 protocol: asyncio.BufferedProtocol) -> None:
        super().__init__()
        self._loop = loop
        self._sock = sslsock
        self._fd = sslsock.fileno()
        # SSL_read itself: SSLSocket.recv_into costs two Python calls more per 16 KiB record.
        self._read: Callable[[int, memoryview], int] = getattr(
            getattr(sslsock, "_sslobj", None), "read", None) or (
            lambda n, buf: sslsock.recv_into(buf, n))
        self._protocol = protocol
        self._extra = {"socket": sslsock, "ssl_object": sslsock, "peername": _name(sslsock, True),
                       "sockname": _name(sslsock, False), "cipher": sslsock.cipher(),
                       "peercert": sslsock.getpeercert(), "sslcontext": sslsock.context}
        self._backlog: collections.deque[Part] = collections.deque()  # not yet encrypted
        self._retry: Part | None = None  # the chunk an SSL_write said to retry, as it was
        self._buffered = 0              # bytes in _backlog and _retry
        self._writer_on = False
        self._write_wants_read = False  # SSL_write needs to read first (TLS 1.2 renegotiation)
        self._read_wants_write = False  # SSL_read needs room to write (a key update's answer)
        self._reading = True
        self._protocol_paused = False
        self._closing = False
        self._lost = False
        self._corked = False
        self._high, self._low = HIGH_WATER, LOW_WATER
        loop.add_reader(self._fd, self._on_readable)
        protocol.connection_made(self)
        loop.call_soon(self._on_readable)   # bytes that came with the handshake's last flight

    # Reading

    def _on_readable(self) -> None:
        if self._lost:
            return
        if self._write_wants_read:
            self._write_wants_read = False
            if not self._reading:
                self._loop.remove_reader(self._fd)  # it was registered for the write alone
            self._write_now()
        for _ in range(READS_PER_EVENT):
            if not self._reading or self._lost:
                return
            if not self._read_once():
                return
        self._loop.call_soon(self._on_readable)     # more may be waiting in OpenSSL's buffer

    def _read_once(self) -> bool:
        """Fill the protocol's buffer from the connection; whether more may be waiting."""
        buf = memoryview(self._protocol.get_buffer(-1))
        size = len(buf)
        if not size:
            return False
        got = 0
        eof = False
        read = self._read
        try:
            while got < size:   # one TLS record per read
                n = read(size - got, buf[got:] if got else buf)
                if n == 0:
                    eof = True
                    break
                got += n
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLWantWriteError:               # a key update's answer waits for room
            self._read_wants_write = True
            if not self._writer_on:
                self._loop.add_writer(self._fd, self._on_writable)
                self._writer_on = True
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            eof = True
        except (OSError, ssl.SSLError) as e:
            self._fatal(e)
            return False
        if got:
            self._protocol.buffer_updated(got)
        if eof:
            self._eof()
            return False
        return got == size

    def _eof(self) -> None:
        if self._lost:
            return
        keep_open = self._protocol.eof_received()
        if not keep_open:
            self.close()

    def pause_reading(self) -> None:
        if self._reading and not self._lost:
            self._reading = False
            if not self._write_wants_read:
                self._loop.remove_reader(self._fd)

    def resume_reading(self) -> None:
        if not self._reading and not self._lost and not self._closing:
            self._reading = True
            self._loop.add_reader(self._fd, self._on_readable)
            self._loop.call_soon(self._on_readable)  # records OpenSSL has read ahead

    def is_reading(self) -> bool:
        return self._reading

    # Writing

    def write(self, data: Part) -> None:
        self.writelines((data,))

    def writelines(self, list_of_data: Iterable[Part]) -> None:
        if self._closing or self._lost:
            return
        for part in list_of_data:
            n = len(part)
            if n:
                self._backlog.append(part)
                self._buffered += n
        if not self._writer_on and not self._write_wants_read:
            self._write_now()
        self._check_high_water()

    def _next_chunk(self) -> Part:
        """The backlog's next write: a large part as it is, or small ones joined."""
        backlog = self._backlog
        first = backlog.popleft()
        if len(first) >= JOIN_BELOW or not backlog or len(backlog[0]) >= JOIN_BELOW:
            return first
        run = [first]
        size = len(first)
        while backlog and size < JOIN_BELOW and len(backlog[0]) < JOIN_BELOW:
            part = backlog.popleft()
            run.append(part)
            size += len(part)
        return b"".join(run)

    def _write_now(self) -> None:
        sock = self._sock
        try:
            while self._retry is not None or self._backlog:
                chunk = self._retry if self._retry is not None else self._next_chunk()
                self._retry = chunk
                if not self._corked and len(chunk) > JOIN_BELOW:
                    self._cork(True)
                sock.send(chunk)    # all of it, or SSLWantWriteError (retried with the same)
                self._retry = None
                self._buffered -= len(chunk)
        except ssl.SSLWantWriteError:
            if not self._writer_on:
                self._loop.add_writer(self._fd, self._on_writable)
                self._writer_on = True
            return
        except ssl.SSLWantReadError:             # TLS 1.2 renegotiation: wait to read
            self._write_wants_read = True
            if not self._reading:
                self._loop.add_reader(self._fd, self._on_readable)
            return
        except (OSError, ssl.SSLError) as e:
            self._fatal(e)
            return
        if self._corked:
            self._cork(False)
        if self._writer_on and not self._read_wants_write:
            self._loop.remove_writer(self._fd)
            self._writer_on = False
        self._check_low_water()
        if self._closing:
            self._finish_close(None)

    def _on_writable(self) -> None:
        if self._lost:
            return
        if self._read_wants_write:
            self._read_wants_write = False
            self._on_readable()
        if not self._lost:
            self._write_now()

    def _cork(self, on: bool) -> None:
        if TCP_CORK is None:
            return
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, TCP_CORK, int(on))
            self._corked = on
        except OSError:
            pass

    def _check_high_water(self) -> None:
        if not self._protocol_paused and self._buffered > self._high:
            self._protocol_paused = True
            self._protocol.pause_writing()

    def _check_low_water(self) -> None:
        if self._protocol_paused and self._buffered <= self._low:
            self._protocol_paused = False
            self._protocol.resume_writing()

    def get_write_buffer_size(self) -> int:
        return self._buffered

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._low, self._high

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._high = HIGH_WATER if high is None else high
        self._low = (self._high // 4 if high is not None else LOW_WATER) if low is None else low
        self._check_high_water()

    def can_write_eof(self) -> bool:
        return False

    # Closing

    def is_closing(self) -> bool:
        return self._closing or self._lost

    def close(self) -> None:
        """Close once what is buffered is written (with a close_notify)."""
        if self._closing or self._lost:
            return
        self._closing = True
        self.pause_reading()
        if not self._buffered:
            self._finish_close(None)

    def abort(self) -> None:
        self._closing = True
        self._finish_close(None, notify=False)

    def _fatal(self, exc: Exception) -> None:
        log.debug("TLS connection from %s failed: %r", self._extra["peername"], exc)
        self._closing = True
        self._finish_close(exc, notify=False)

    def _finish_close(self, exc: Exception | None, notify: bool = True) -> None:
        if self._lost:
            return
        self._lost = True
        self._loop.remove_reader(self._fd)
        if self._writer_on:
            self._loop.remove_writer(self._fd)
            self._writer_on = False
        if notify:
            try:
                self._sock.unwrap()     # sends close_notify; the peer's is not awaited
            except (*_AGAIN, ssl.SSLError, OSError, ValueError):
                pass
        self._sock.close()
        self._backlog.clear()
        self._retry = None
        self._buffered = 0
        self._loop.call_soon(self._protocol.connection_lost, exc)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._extra.get(name, default)

    def get_protocol(self) -> asyncio.BufferedProtocol:
        return self._protocol

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        assert isinstance(protocol, asyncio.BufferedProtocol)
        self._protocol = protocol


def _name(sock: socket.socket, peer: bool) -> Any:
    try:
        return sock.getpeername() if peer else sock.getsockname()
    except OSError:
        return None
