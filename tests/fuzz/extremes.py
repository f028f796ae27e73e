"""Requests of any served API and version whose fields hold their extremes (issue 42): for every
field in the version's schema, one of null, empty, the type's max and min, -1 / 0 / 1, or a
plausible value (the fuzz topic, the group, a valid record batch) so that requests reach past
the first check. Shared by tests/fuzz/test_field_extremes.py (hypothesis, CI-sized) and
benchmarks/fuzz_long.py --extremes (the long run).

`extreme_request(cls, version, rng)` builds the object; `extreme_frame(...)` encodes it with
kafka-python's encoder (which writes a null as a -1 length whatever the field's nullableVersions
say, so non-nullable nulls reach the broker as a real client bug would send them).
"""
from __future__ import annotations

import math
import random
import struct
import uuid
from typing import Any

from corpus import GROUP, TOPIC
from minibroker.log.batch import build_batch
from minibroker.network.client import encode_request

_INTS = {
    "int8": (-2**7, 2**7 - 1), "int16": (-2**15, 2**15 - 1), "int32": (-2**31, 2**31 - 1),
    "int64": (-2**63, 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
}
_BATCH = bytes(build_batch([(b"k", b"v", [])], timestamp=1_700_000_000_000))
_STRINGS = (None, "", TOPIC, GROUP, "x" * 300, "\u00e9", "fuzz-new")
_BYTES = (None, b"", b"\x00", _BATCH)
_UUIDS = (None, uuid.UUID(int=0), uuid.UUID(int=2**128 - 1), uuid.UUID(int=1))
_FLOATS = (0.0, -1.0, math.inf, -math.inf, math.nan)
MAX_DEPTH = 4


def _int_choices(lo: int, hi: int) -> tuple[int, ...]:
    return tuple(sorted({lo, hi, hi - 1, lo + 1, 0, 1} | ({-1} if lo < 0 else set())))


def _simple(type_str: str, rng: random.Random) -> Any:
    if type_str in _INTS:
        return rng.choice(_int_choices(*_INTS[type_str]))
    if type_str == "bool":
        return rng.random() < 0.5
    if type_str == "string":
        return rng.choice(_STRINGS)
    if type_str in ("bytes", "records"):
        return rng.choice(_BYTES)
    if type_str == "uuid":
        return rng.choice(_UUIDS)
    if type_str == "float64":
        return rng.choice(_FLOATS)
    raise ValueError(f"no extremes for type {type_str}")


def _array(field, version: int, rng: random.Random, depth: int) -> list | None:
    roll = rng.random()
    if roll < 0.15:
        return None
    if roll < 0.3 or depth >= MAX_DEPTH:
        return []
    n = 1 if roll < 0.8 else 2
    if field.is_struct_array():
        return [_struct(field.array_of, version, rng, depth + 1) for _ in range(n)]
    return [_simple(field.array_of._type_str, rng) for _ in range(n)]


def _value(field, version: int, rng: random.Random, depth: int) -> Any:
    if field.is_array():            # StructArrayField is an ArrayField too
        return _array(field, version, rng, depth)
    if field.is_struct():
        if rng.random() < 0.15:
            return None
        return _struct(field, version, rng, depth + 1)
    return _simple(field._type_str, rng)


def _struct(struct_field, version: int, rng: random.Random, depth: int) -> Any:
    kwargs = {}
    for name, field in struct_field.fields.items():
        if field.for_version_q(version):
            kwargs[name] = _value(field, version, rng, depth)
    return struct_field.data_class(**kwargs)


def extreme_request(cls, version: int, rng: random.Random) -> Any:
    """A `cls` request (an ApiMessage class) for `version`, every field at an extreme."""
    kwargs = {}
    for name, field in cls._struct.fields.items():
        if field.for_version_q(version):
            kwargs[name] = _value(field, version, rng, 0)
    return cls(**kwargs)


def extreme_frame(cls, version: int, rng: random.Random, corr: int = 1) -> bytes | None:
    """The request's frame without its 4-byte size, or None when kafka-python cannot encode the
    drawn values (e.g. a null uuid): such a request cannot be sent by that encoder either."""
    req = extreme_request(cls, version, rng)
    try:
        parts = encode_request(req, version, corr, "fuzz")
    except (TypeError, ValueError, AttributeError, struct.error, OverflowError):
        return None
    return b"".join(bytes(p) for p in parts)[4:]
