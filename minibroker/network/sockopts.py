"""Socket options shared by the broker's and the client's connections.

TCP_NODELAY: requests and responses are written whole (one writelines each), so Nagle's algorithm
would only delay small ones.

TCP_QUICKACK while large frames arrive (Linux): each response written puts the socket back in
Linux's delayed-ACK "pingpong" mode, where received data is acknowledged late, in the hope of
riding on the next response. A producer streaming large requests then waits for those ACKs (its
window and pacing run on them): 10 KiB acks=all produce ran ~5% slower and its client's CPU per GB
~6% higher. Leaving pingpong mode after each read costs a system call, so it is done only on
connections whose frames are large.

SO_RCVLOWAT is not used. Waking once per 256 KiB of a large frame rather than once per 64 KiB
loopback segment helped while ACKs were delayed; with quick ACKs it left 3-4x the reordered and
retransmitted segments and cost the producing client ~7% (benchmarks/README.md, eighth round).
"""
from __future__ import annotations

import socket
from typing import Any

TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


class SocketTuning:
    __slots__ = ("_sock",)

    def __init__(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        self._sock = None
        if sock is None:
            return
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, AttributeError):
            return
        if TCP_QUICKACK is not None:
            self._sock = sock

    def quick_ack(self) -> None:
        """After a read on a connection carrying large frames: acknowledge what arrives at once."""
        if self._sock is None:
            return
        try:
            self._sock.setsockopt(socket.IPPROTO_TCP, TCP_QUICKACK, 1)
        except OSError:
            self._sock = None       # closed under us
