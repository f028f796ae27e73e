"""Socket options shared by the broker's and the client's connections.

TCP_NODELAY: requests and responses are written whole (one writelines each), so Nagle's algorithm
would only delay small ones.

SO_RCVLOWAT (Linux): while a large frame is arriving, the kernel is asked not to report the socket
readable until the rest of it (up to 256 KiB more) is there, so the reader wakes a few times per
frame instead of once per TCP segment (64 KiB on loopback). Each wake-up costs the reader an epoll
round, a read and a Python callback, and costs the *sender* a cross-CPU wake-up; a 1 MB produce
request took 16 of them. A peer that closes still wakes the reader (EOF is always readable).

TCP_QUICKACK while large frames arrive: each response we write puts the socket back in Linux's
"pingpong" mode, where received data is acknowledged late, in the hope of riding on our next
response. A producer streaming large requests then waits for those ACKs (its window and pacing run
on them): 10 KiB acks=all produce ran ~5% slower, its client's CPU per GB ~6% higher
(benchmarks/README.md). Leaving pingpong mode after each read costs a system call, so it is done
only on connections carrying large frames.
"""
from __future__ import annotations

import socket
import sys
from typing import Any

SO_RCVLOWAT = getattr(socket, "SO_RCVLOWAT", None) if sys.platform == "linux" else None


class SocketTuning:
    WAIT_FROM = 64 * 1024       # a frame missing less than this is read as it comes
    # Read at least every 256 KiB, while the bytes are likely still in cache. Against fresh
    # brokers, waiting for up to 1 MiB (this VM's L2) gave 12% less 10 KiB acks=all throughput
    # (medians of 6-9 alternating runs: 1,772 vs 2,010 MB/s; the mock 1,997). After the 100 B
    # scenarios, as in benchmarks/run.py, 2 runs each could not tell the two apart.
    WAIT_AT_MOST = 256 * 1024

    __slots__ = ("_sock", "_lowat")

    def __init__(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        self._sock = None
        self._lowat = 1
        if sock is None:
            return
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, AttributeError):
            return
        if SO_RCVLOWAT is not None:
            self._sock = sock

    def wake_when(self, missing: int, large_frames: bool = False) -> None:
        """`missing` bytes of the frame being received have not arrived yet (0: none begun);
        `large_frames`: one is arriving or the last one was large (acknowledge data at once)."""
        if self._sock is None:
            return
        if large_frames:
            try:
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            except OSError:
                pass
        want = 1 if missing < self.WAIT_FROM else min(missing, self.WAIT_AT_MOST)
        if want != self._lowat:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, SO_RCVLOWAT, want)
                self._lowat = want
            except OSError:
                sock, self._sock = self._sock, None     # closed under us: read as data comes
                try:
                    sock.setsockopt(socket.SOL_SOCKET, SO_RCVLOWAT, 1)
                except OSError:
                    pass
