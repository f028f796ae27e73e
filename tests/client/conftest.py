from __future__ import annotations

import pytest

from minibroker.cluster import Cluster


@pytest.fixture
async def cluster():
    async with Cluster(brokers=3, group_initial_rebalance_delay_ms=0) as c:
        yield c
