"""The links between `serve --processes`' broker processes (minibroker/processes/mesh.py): frames
pass between processes holding the same secret; a connection that cannot prove it holds the
secret is closed, with a log line, before a byte of it is unpickled; a link that ends tells the
other side its peer is gone."""
from __future__ import annotations

import asyncio
import logging
import os
import struct

from minibroker.processes.frames import frame
from minibroker.processes.mesh import HOST, MAX_UNPROVEN, Mesh


class Node:
    def __init__(self, node_id: int, secret: bytes) -> None:
        self.got: list[tuple[int, object]] = []
        self.joined: list[int] = []
        self.lost: list[int] = []
        self.undelivered: list[tuple[int, object]] = []
        self.mesh = Mesh(node_id, secret, lambda p, m: self.got.append((p, m)),
                         self.joined.append, self.lost.append,
                         lambda p, m: self.undelivered.append((p, m)))


async def _until(check, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not within %.0f s" % seconds)


class _Boom:
    """Unpickling this creates a file: it must never be unpickled."""
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


async def test_links_carry_frames_between_holders_of_the_secret_and_say_when_one_ends():
    a, b = Node(1, b"s" * 32), Node(2, b"s" * 32)
    for n in (a, b):
        await n.mesh.start()
    a.mesh.set_addresses({2: b.mesh.port})
    for i in range(3):
        a.mesh.send(2, ("vote", i))
    await _until(lambda: len(b.got) == 3)
    assert b.got == [(1, ("vote", 0)), (1, ("vote", 1)), (1, ("vote", 2))]    # in order
    assert b.joined == [1] and b.lost == []
    a.mesh.send(3, ("call", 7))                         # no address known for 3
    assert a.undelivered == [(3, ("call", 7))]
    await a.mesh.close()
    await _until(lambda: b.lost == [1])
    await b.mesh.close()


async def test_a_connection_without_the_secret_is_closed_unread(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "minibroker.processes")
    b, stranger = Node(2, b"s" * 32), Node(9, b"x" * 32)
    await b.mesh.start()
    await stranger.mesh.start()
    # A process with another secret: its proof fails; what it meant to send is undelivered.
    stranger.mesh.set_addresses({2: b.mesh.port})
    stranger.mesh.send(2, ("call", 1))
    await _until(lambda: stranger.undelivered == [(2, ("call", 1))])
    # A raw connection sends a frame at once, as a proof: it is closed, never unpickled.
    bomb = str(tmp_path / "unpickled")
    reader, writer = await asyncio.open_connection(HOST, b.mesh.port)
    await reader.readexactly(32)
    payload = frame(_Boom(bomb))
    writer.write(struct.pack(">i", 1) + payload.ljust(64, b"\0")[:64] + frame(_Boom(bomb)))
    assert await asyncio.wait_for(reader.read(), 5) == b""          # closed by b
    writer.close()
    assert not os.path.exists(bomb) and b.got == [] and b.joined == []
    assert sum("did not prove it holds the mesh secret" in r.getMessage()
               for r in caplog.records) == 2
    await b.mesh.close()
    await stranger.mesh.close()


async def test_connections_that_never_prove_themselves_are_bounded(caplog):
    """A local process opening connections it never proves holds at most MAX_UNPROVEN of them
    (each closed after HELLO_TIMEOUT_S); the next is closed at once, and a peer with the secret
    still gets through once they are gone."""
    caplog.set_level(logging.WARNING, "minibroker.processes")
    a, b = Node(1, b"s" * 32), Node(2, b"s" * 32)
    await b.mesh.start()
    await a.mesh.start()
    held = [await asyncio.open_connection(HOST, b.mesh.port) for _ in range(MAX_UNPROVEN)]
    for reader, _ in held:
        assert len(await reader.readexactly(32)) == 32        # each challenged
    reader, writer = await asyncio.open_connection(HOST, b.mesh.port)
    assert await asyncio.wait_for(reader.read(), 5) == b""   # one more: closed unchallenged
    writer.close()
    assert any("have yet to prove themselves" in r.getMessage() for r in caplog.records)
    for _, w in held:
        w.close()
    a.mesh.set_addresses({2: b.mesh.port})
    a.mesh.send(2, ("vote", 1))
    await _until(lambda: b.got == [(1, ("vote", 1))])
    await a.mesh.close()
    await b.mesh.close()
