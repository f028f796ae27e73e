"""Nulls where the schema allows none: the generic decoder reads a -1 length as None whatever the
field's nullableVersions say, and a handler then fails on it (25 API/field pairs in a fuzz run,
each a "handler failed" traceback). `first_null` names the first such field, so dispatch can
close the connection with one line, as Kafka's parser refuses the request.
"""
from __future__ import annotations

from typing import Any


def first_null(struct: Any, obj: Any, version: int, path: str = "") -> str | None:
    """The dotted path of the first non-nullable field of `obj` (decoded at `version`) that is
    None, or None if there is none. Tagged fields are skipped (absent ones take defaults)."""
    key: str
    for key, field in struct.fields.items():
        if field._tag is not None or not field.for_version_q(version):
            continue
        value = getattr(obj, key, None)
        if value is None:
            if not field.nullable_for_version_q(version):
                return path + key
            continue
        if field.is_struct_array():
            inner = field.array_of
            for i, item in enumerate(value):
                found = first_null(inner, item, version, f"{path}{key}[{i}].")
                if found:
                    return found
        elif field.is_array():
            # Kafka's array elements are never nullable ("[]string" has no nullableVersions of
            # its own; kafka-python's inner field only copies the array's).
            for i, item in enumerate(value):
                if item is None:
                    return f"{path}{key}[{i}]"
        elif field.is_struct():
            found = first_null(field, value, version, f"{path}{key}.")
            if found:
                return found
    return None
