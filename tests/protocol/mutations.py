"""Hypothesis helper of the codec tests: a valid body with a few bytes overwritten."""
from __future__ import annotations

from hypothesis import strategies as st


def overwrite_some(body: bytes, data) -> memoryview:
    """`body` with 1 to 4 bytes, at places `data` draws, set to drawn values."""
    out = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4))):
        out[data.draw(st.integers(0, len(out) - 1))] = data.draw(st.integers(0, 255))
    return memoryview(bytes(out))
