"""A broker answering nonsense (a frame too short for a correlation id, a wrong correlation id)
closes the client connection and fails every request in flight, the mismatched one included, with
ConnectionClosed: nothing waits forever and nothing raises out of the protocol callback."""
from __future__ import annotations

import struct

import pytest

from cluster_helpers import fetch_request
from minibroker.network.client import ConnectionClosed, KafkaClientConnection


class _Transport:
    def get_extra_info(self, name, default=None):
        return default

    def writelines(self, data) -> None:
        pass

    def write(self, data) -> None:
        pass

    def close(self) -> None:
        pass


def _receive(conn: KafkaClientConnection, data: bytes) -> None:
    buf = conn.get_buffer(len(data))
    buf[:len(data)] = data
    conn.buffer_updated(len(data))


@pytest.mark.parametrize("frame, reason", [
    (b"\x00\x01", "response of 2 bytes has no correlation id"),
    (struct.pack(">i", 99) + b"\x00", "correlation id mismatch: got 99, want 1"),
])
async def test_bad_response_fails_every_request_in_flight(frame, reason):
    conn = KafkaClientConnection()
    conn.connection_made(_Transport())
    first = conn.send(fetch_request("t", 0, 0), 12)
    second = conn.send(fetch_request("t", 0, 0), 12, raw=True)
    _receive(conn, struct.pack(">i", len(frame)) + frame)
    assert conn.closed and conn.close_reason == reason
    for fut in (first, second):
        with pytest.raises(ConnectionClosed, match=reason):
            await fut
    assert not conn.inflight
