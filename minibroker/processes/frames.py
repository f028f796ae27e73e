"""Pickled frames, length first: on the supervisor's pipes (a socketpair: only the supervisor
and one broker process hold its ends) and on the processes' links once a connection proved it
holds the link secret (mesh.py). Never read from anything else."""
from __future__ import annotations

import asyncio
import pickle
import struct
from typing import Any

_LEN = struct.Struct(">I")


def frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(data)) + data


async def read(reader: asyncio.StreamReader) -> Any:
    (n,) = _LEN.unpack(await reader.readexactly(_LEN.size))
    return pickle.loads(await reader.readexactly(n))
