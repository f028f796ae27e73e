"""In-memory transport: a client connection joined to a server's `handle(conn, frame)` by a pipe.

    client = connect(broker.handle)
    resp = await client.request(ApiVersionsRequest(), 3)

Both ends are the real protocol objects (KafkaClientConnection, KafkaServerConnection), so the
same framing, size checks, concurrent handling and in-order responses apply as over TCP; only the
socket is replaced. Each write is copied once into a buffer handed to the other end, which takes
its whole frames from it (FrameReader.take) in a later loop pass (loop.call_soon, FIFO), as bytes
read from a socket would be: frames arrive in the order written, and no handler runs inside the
caller's send. A Fetch response carrying at least 64 KiB of stored batches reaches a client end
with those batches by reference instead (protocol/gathered.py). Brokers of one process link this
way (NetworkPartitions.connect), saving the kernel's send and receive copies and TCP's work per
transfer; unit tests use it for a broker's handlers without sockets or ports.
"""
from __future__ import annotations

import asyncio
import itertools
from typing import Any, Iterable, Protocol

from minibroker.network.client import KafkaClientConnection
from minibroker.network.tcp import Handle, KafkaServerConnection
from minibroker.protocol.gathered import Gathered, gather

_peer_ids = itertools.count(1)


class Buffer(Protocol):
    """What a transport writes: anything with the buffer protocol (collections.abc.Buffer from
    Python 3.12 on)."""

    def __buffer__(self, flags: int, /) -> memoryview: ...


class _PipeEnd(asyncio.Transport):
    """One end of the pipe: what its protocol writes is delivered to the other end's protocol."""

    def __init__(self, loop: asyncio.AbstractEventLoop, protocol: Any, peername: tuple[str, int],
                 sockname: tuple[str, int] | None = None) -> None:
        super().__init__()
        self._loop = loop
        self._protocol = protocol
        self._peername = peername
        self._sockname = sockname
        self.peer: _PipeEnd | None = None
        self._closing = False
        self._paused = False
        self._held: list[bytearray | Gathered] = []     # arrived while our protocol paused reading
        # Whether our protocol takes Gathered frames (protocol/gathered.py): a client's does.
        self._gathers = getattr(protocol, "takes_gathered", False)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            return self._peername
        return self._sockname if name == "sockname" and self._sockname else default

    def is_closing(self) -> bool:
        return self._closing

    def write(self, data: Buffer) -> None:
        self.writelines([data])

    def writelines(self, parts: Iterable[Buffer]) -> None:
        if self._closing:
            return
        assert self.peer is not None, "connect() joins both ends before either writes"
        if self.peer._gathers and type(parts) is list:
            frame = gather(parts)       # a Fetch response's stored batches, passed by reference
            if frame is not None:
                self._loop.call_soon(self.peer._arrive, frame)
                return
        data = bytearray().join(parts)  # a copy: the writer may reuse its buffers once this returns
        if data:
            self._loop.call_soon(self.peer._arrive, data)

    def _arrive(self, data: bytearray | Gathered) -> None:
        if self._closing:
            return
        if self._paused:
            self._held.append(data)
        else:
            self._protocol.frames_arrived(data)

    def pause_reading(self) -> None:
        self._paused = True

    def resume_reading(self) -> None:
        self._paused = False
        held, self._held = self._held, []
        for data in held:
            self._arrive(data)

    def is_reading(self) -> bool:
        return not self._paused

    def close(self) -> None:
        """Close both ends, as a socket closed on one side is seen closed on the other."""
        if self._closing:
            return
        self._closing = True
        self._held = []
        self._loop.call_soon(self._protocol.connection_lost, None)
        assert self.peer is not None, "connect() joins both ends before either closes"
        self.peer.close()

    def abort(self) -> None:
        self.close()


def connect(handle: Handle, *, max_request_bytes: int = 100 * 1024 * 1024,
            connections: dict[KafkaServerConnection, None] | None = None,
            name: str = "memory server",
            client_id: str = "minibroker") -> KafkaClientConnection:
    """A client connection whose requests are answered by `handle` (e.g. a Broker's .handle).
    `connections` receives the server end while it is open (a Broker's own set: stop closes it)."""
    loop = asyncio.get_running_loop()
    n = next(_peer_ids)
    client = KafkaClientConnection(client_id)
    server = KafkaServerConnection(handle, max_request_bytes,
                                   connections if connections is not None else {}, name)
    client_end = _PipeEnd(loop, client, ("memory-server", n), ("memory", n))
    server_end = _PipeEnd(loop, server, ("memory", n), ("memory-server", n))
    client_end.peer, server_end.peer = server_end, client_end
    server.connection_made(server_end)
    client.connection_made(client_end)
    return client


def server_of(client: KafkaClientConnection) -> KafkaServerConnection:
    """The server end of a pipe `connect` returned (to give it a principal)."""
    pipe = client.transport
    assert isinstance(pipe, _PipeEnd) and pipe.peer is not None, "not a connect() pipe"
    server: KafkaServerConnection = pipe.peer._protocol
    return server
