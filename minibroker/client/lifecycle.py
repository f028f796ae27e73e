"""What the clients share in stopping: the connection pool and the cluster metadata kept over it,
closed with the client, and a background task stopped and waited for."""
from __future__ import annotations

import asyncio

from minibroker.client.connection_pool import ConnectionPool
from minibroker.client.metadata import ClusterMetadata


class PooledClient:
    """A client over a ConnectionPool and its ClusterMetadata; `async with` closes it."""

    pool: ConnectionPool
    metadata: ClusterMetadata

    def _close_connections(self) -> None:
        self.metadata.close()
        self.pool.close()

    async def close(self) -> None:
        self._close_connections()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


async def cancel_and_wait(task: asyncio.Task) -> None:
    """Cancel `task` and wait until it ended, however it ends (the client is stopping)."""
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):  # noqa: BLE001
        pass
