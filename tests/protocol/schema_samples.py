"""Instances of generated schema classes with every field of a version set, for round-trip tests;
each test module supplies its own scalar values so the two suites cover different ones."""
from __future__ import annotations


def build(data_class, struct, version: int, counter: list[int], scalar, array_len: int):
    """An instance of ``data_class`` with every field of ``version`` set to a non-default value:
    ``scalar(codec, n)`` for the n-th field, arrays of ``array_len`` scalars, two structs."""
    values = {}
    for field in struct._fields:
        if not field.for_version_q(version):
            continue
        counter[0] += 1
        n = counter[0]
        if field.is_struct_array():
            inner = field.array_of
            values[field.name] = [build(inner.data_class, inner, version, counter, scalar,
                                        array_len) for _ in range(2)]
        elif field.is_struct():
            values[field.name] = build(field.data_class, field, version, counter, scalar,
                                       array_len)
        elif field.is_array():
            values[field.name] = [scalar(field.array_of._type, n + i) for i in range(array_len)]
        else:
            values[field.name] = scalar(field._type, n)
    return data_class(version=version, **values)
