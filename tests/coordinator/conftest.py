"""Fixtures of the coordinator unit tests."""
from __future__ import annotations

import pytest


@pytest.fixture
async def broker(request):
    """The test module's `make_broker()` (one broker, shard 0 loaded); its group coordinator is
    stopped afterwards."""
    b = await request.module.make_broker()
    yield b
    await b.groups.stop()
