"""One driver module per real client, all with the same small functional surface.

Every driver module exposes:

- ``NAME``; ``CODECS``: the codecs it can produce with; ``MISSING_CODECS``: {codec: reason}.
- ``HAS_ADMIN``: whether the client has an admin API (create/describe configs/add partitions/delete).
- ``HAS_IDEMPOTENCE``: whether ``produce(..., idempotent=True)`` is supported.
- ``create_topic(bs, name, partitions, rf, configs=None, timeout)`` (configs: {name: str})
- ``produce(bs, topic, records, codec, acks="all", idempotent=False, timeout)``
  -> ``list[(partition, offset)]`` in input order, or ``None`` when the client does not report
  offsets (kcat).
- ``consume_assigned(bs, topic, partitions, expected_count, timeout)``
  -> ``list[(partition, offset, key, value)]`` (at most ``expected_count`` records, stops at the
  deadline; the caller checks the count).
- ``list_offsets(bs, topic, timeout)`` -> ``{partition: (earliest, latest)}``.
- ``partition_count(bs, topic, timeout)`` -> int (from Metadata).
- with ``HAS_ADMIN``: ``describe_configs(bs, topic, timeout) -> {name: value}``,
  ``create_partitions(bs, topic, total, timeout)``, ``delete_topic(bs, topic, timeout)``,
  ``list_topics(bs, timeout) -> set[str]``.

Keys and values are ``bytes``. Every call is bounded by its ``timeout`` (seconds).
"""
from __future__ import annotations

import asyncio
import importlib
from types import ModuleType

ALL_CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CLIENTS = ("kafka_python", "aiokafka", "confluent", "kafkajs", "kcat")


class DriverError(RuntimeError):
    """A client reported a failure (or did not finish in time)."""


def run_bounded(coro, timeout: float, name: str):
    """asyncio.run of an in-process client's coroutine; DriverError when it takes over `timeout`
    seconds."""
    async def bounded():
        try:
            return await asyncio.wait_for(coro, timeout)
        except asyncio.TimeoutError as e:
            raise DriverError(f"{name}: no result within {timeout}s") from e
    return asyncio.run(bounded())


def load(name: str) -> ModuleType:
    if name not in CLIENTS:
        raise KeyError(name)
    return importlib.import_module(f"{__name__}.{name}")
