"""The protocol trace's JSON text (broker/trace.py), written straight from a message's objects.

Each message version gets one generated function returning one f-string: the keys are literal
text and each value is formatted by its schema type (an int as itself, a string through the C
string quoter, a struct through its own generated function), so no dict is built and no JSON
encoder walks one. Record sets are summarised per batch header, each batch one %-format. What
comes out is what json.dumps(separators=(",", ":")) writes for the same dicts; building the dicts
and encoding them was most of the trace's cost.
"""
from __future__ import annotations

import functools
import json
import keyword
import struct
import uuid
from collections.abc import Sequence
from json.encoder import encode_basestring_ascii
from typing import Any, Callable, cast

# base offset, length, magic, attributes, producer id, producer epoch, base sequence, record
# count (the partition leader epoch, crc, last offset delta and timestamps skipped)
_BATCH = struct.Struct(">qi4xb4xh20xqhii")
_HEAD = struct.Struct(">qiib")
_HEADER = _BATCH.size                   # a magic 2 batch header's bytes (61)
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
_CODEC_OF = CODECS + (5, 6, 7)          # attributes & 7 → its name, else the number
# attributes & 0x3f → its codec, transactional and control as JSON (bit 3, the timestamp type,
# is not shown): one lookup instead of three values formatted per batch
_ATTRS_JSON = tuple('"codec":%s,"transactional":%s,"control":%s' % (
    json.dumps(_CODEC_OF[a & 7]), json.dumps(bool(a & 0x10)), json.dumps(bool(a & 0x20)))
    for a in range(64))
_HEX_UP_TO = 64
quote: Callable[[str], str] = encode_basestring_ascii   # the C quoter: '"..."', escaped
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False, default=repr).encode


def ENCODE(value: Any) -> str:  # noqa: N802 — the module's encoder, as a constant would be
    """json.dumps(value) (compact; unknown types by repr): the common scalars without
    JSONEncoder's per-call set-up (it makes a C encoder each time)."""
    if type(value) is str:
        return quote(value)
    return "null" if value is None else _ENCODER(value)


def _batch_items(buf: memoryview, out: list[str]) -> int:
    """Appends the summary of each batch header in `buf` to `out`; returns where the last
    batch ends against the buffer's end: 0, less (the last batch runs past the end: summarised
    by its size) or more (bytes left over, too few for a header: a fetch may end in a part)."""
    pos, end = 0, len(buf)
    whole, head = _BATCH.unpack_from, _HEAD.unpack_from
    while pos + 17 <= end:
        if pos + _BATCH.size <= end:     # one unpack for the whole header (most batches)
            base_offset, length, magic, attrs, pid, pepoch, seq, count = whole(buf, pos)
        else:
            base_offset, length, _epoch, magic = head(buf, pos)
        size = 12 + length
        if magic != 2 or pos + _BATCH.size > end:
            out.append('{"base_offset":%d,"magic":%d,"size":%d}' % (base_offset, magic, size))
        else:
            out.append(f'{{"base_offset":{base_offset},"count":{count},"producer_id":{pid},'
                       f'"producer_epoch":{pepoch},"base_sequence":{seq},'
                       f'{_ATTRS_JSON[attrs & 0x3f]},"size":{size}}}')
        pos += size
    return end - pos


def batches_json(records: Any) -> str:
    """The record batches of a record set summarised as JSON text, one %-format per batch
    (magic 2; older formats by size only; a fetch may end in a partial batch)."""
    buf = memoryview(records).cast("B") if not isinstance(records, memoryview) else records
    out: list[str] = []
    left = _batch_items(buf, out)
    if left > 0:
        out.append('{"partial":%d}' % left)
    return "[" + ",".join(out) + "]"


_ITEM = ('{"base_offset":%d,"count":%d,"producer_id":%d,"producer_epoch":%d,"base_sequence":%d,'
         '%s,"size":%d}')


@functools.lru_cache(maxsize=64)
def _items_format(count: int) -> str:
    """The format of `count` whole batches' summaries: filled by one % for them all."""
    return "[" + ",".join([_ITEM] * count) + "]"


def _whole_batches_json(buffers: Sequence[Any]) -> str | None:
    """buffers_json when each buffer is one whole magic 2 batch (as Fetch sends the stored
    slices), else None: the headers unpacked, then written by one % format."""
    values: list[Any] = []
    add, whole = values.extend, _BATCH.unpack_from
    for b in buffers:
        n = len(b)
        if n < _HEADER:
            return None
        base_offset, length, magic, attrs, pid, pepoch, seq, count = whole(b, 0)
        if length + 12 != n or magic != 2:
            return None
        add((base_offset, count, pid, pepoch, seq, _ATTRS_JSON[attrs & 0x3f], n))
    return _items_format(len(buffers)) % tuple(values)


def buffers_json(buffers: Sequence[Any]) -> str:
    """batches_json of buffers sent back to back (a Fetch answer's stored batches), read in
    place: joined only if a batch straddles two of them."""
    text = _whole_batches_json(buffers)
    if text is not None:
        return text
    out: list[str] = []
    last = len(buffers) - 1
    for i, b in enumerate(buffers):
        left = _batch_items(b if type(b) is memoryview else memoryview(b), out)
        if left and i < last:       # a batch across two buffers: read as sent
            return batches_json(b"".join(buffers))
        if left > 0:
            out.append('{"partial":%d}' % left)
    return "[" + ",".join(out) + "]"


def batches(records: Any) -> list[dict[str, Any]]:
    """batches_json(records) as dicts (strict mode's checks read them)."""
    return cast("list[dict[str, Any]]", json.loads(batches_json(records)))


def scalar(value: Any, key: str) -> Any:
    """A field value as JSON-ready data: bytes shortened (record sets summarised), UUIDs as
    text, bit sets as sorted lists."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        if key == "records":
            return batches(value)
        n = len(value) if not isinstance(value, memoryview) else value.nbytes
        return bytes(value).hex() if n <= _HEX_UP_TO else {"bytes": n}
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [scalar(v, key) for v in value]
    if isinstance(value, (set, frozenset)):     # a bitfield (authorized operations): its bits
        return sorted(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def value_json(value: Any, key: str) -> str:
    """Any field value as JSON text (the generated functions' way for what they do not inline)."""
    if key == "records" and isinstance(value, (bytes, bytearray, memoryview)):
        return batches_json(value)
    return ENCODE(scalar(value, key))


def fields_json(obj: Any, version: int, errors: set[int]) -> str:
    """A message's fields as JSON text (record sets summarised, bytes shortened), adding each
    non-zero error code met to `errors`."""
    schema = obj._struct
    walk = _WALKS.get((id(schema), version)) or _walk(schema, version)
    return walk(obj, errors)


# a generated walk: (message, errors met) -> its fields as JSON text
Walk = Callable[[Any, set[int]], str]
_WALKS: dict[tuple[int, int], Walk] = {}
_INTS = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32"})
_INT_ARRAYS = frozenset({"[]int32", "[]int64"})


def _value(f: Any, get: str, k: str, scope: dict[str, Any], version: int) -> str:
    """The f-string expression writing field `f` (read by `get`) as JSON text."""
    t = f.type_str
    if f.is_struct() or f.is_struct_array():
        scope[f"W{k}"] = _walk(f, version)     # nested objects' schema is the field's own
        each = (f"W{k}(v, errors)" if f.is_struct()
                else f"L + C.join([W{k}(x, errors) for x in v]) + R")
        return f"N if (v := {get}) is None else {each}"
    if t in _INTS and f.name.endswith("error_code"):      # a non-zero code is noted too
        return f"(v and (errors.add(v) or v)) if type(v := {get}) is int else X(v, {k})"
    if t in _INTS:
        return f"v if type(v := {get}) is int else X(v, {k})"
    if t == "string":
        return f"E(v) if type(v := {get}) is str else N if v is None else X(v, {k})"
    if t == "bool":
        return f"(T if v else F) if type(v := {get}) is bool else X(v, {k})"
    if t in _INT_ARRAYS:
        return f"L + C.join(map(str, v)) + R if type(v := {get}) is list else X(v, {k})"
    return f"X({get}, {k})"


def _walk(schema: Any, version: int) -> Walk:
    """fields_json() for one message version: one generated f-string."""
    walk = _WALKS.get((id(schema), version))
    if walk is not None:
        return walk
    scope: dict[str, Any] = {"N": "null", "T": "true", "F": "false", "L": "[", "R": "]",
                             "C": ",", "E": quote, "X": value_json}
    items = []
    for i, f in enumerate(x for x in schema._fields if x.for_version_q(version)):
        name, k = f.name, f"K{i}"
        scope[k] = name
        plain = name.isidentifier() and not keyword.iskeyword(name)
        get = f"o.{name}" if plain else f"getattr(o, {k})"
        key = json.dumps(name) if plain else "{J" + k + "}"
        scope["J" + k] = json.dumps(name)
        items.append(f"{key}:{{{_value(f, get, k, scope, version)}}}")
    code = "def walk(o, errors):\n    return f'''{{" + ",".join(items) + "}}'''\n"
    exec(compile(code, f"<trace json {schema.__class__.__name__} v{version}>", "exec"), scope)
    walk = _WALKS[(id(schema), version)] = cast(Walk, scope["walk"])
    return walk


def fetch_json(version: int, source: tuple[Any, ...], errors: set[int]) -> str:
    """A Fetch response as JSON text, from what its fast encoder (protocol.fast
    encode_fetch_response) was given: (throttle, error code, session id, topics, node
    endpoints). What decoding the bytes sent gives, without decoding them."""
    throttle, error_code, session_id, topics, endpoints = source
    if error_code:
        errors.add(error_code)
    head = '{"throttle_time_ms":%d' % throttle
    if version >= 7:
        head += ',"error_code":%d,"session_id":%d' % (error_code, session_id)
    by_id, tagged = version >= 13, version >= 12
    out = []
    for name, parts in topics:
        items = []
        for p in parts:
            if p.error_code:
                errors.add(p.error_code)
            text = '{"partition_index":%d,"error_code":%d,"high_watermark":%d,' \
                '"last_stable_offset":%d' % (p.partition_index, p.error_code, p.high_watermark,
                                             p.last_stable_offset)
            if version >= 5:
                text += ',"log_start_offset":%d' % p.log_start_offset
            if tagged:
                div, leader = p.diverging_epoch, p.current_leader
                text += ',"diverging_epoch":%s,"current_leader":%s,"snapshot_id":null' % (
                    "null" if div is None else '{"epoch":%d,"end_offset":%d}' % div,
                    "null" if leader is None else '{"leader_id":%d,"leader_epoch":%d}' % leader)
            aborted = p.aborted_transactions
            text += ',"aborted_transactions":' + ("null" if aborted is None else "[%s]" % ",".join(
                '{"producer_id":%d,"first_offset":%d}' % a for a in aborted))
            if version >= 11:
                text += ',"preferred_read_replica":%d' % p.preferred_read_replica
            records = p.records
            items.append(text + ',"records":%s}' % (
                "null" if records is None else buffers_json(records)))
        out.append('{%s,"partitions":[%s]}' % (
            '"topic_id":"%s"' % name if by_id else '"topic":' + quote(name), ",".join(items)))
    text = head + ',"responses":[' + ",".join(out) + "]"
    if version >= 16:
        text += ',"node_endpoints":[%s]' % ",".join(
            '{"node_id":%d,"host":%s,"port":%d,"rack":%s}' % (
                e.node_id, quote(e.host), e.port, ENCODE(e.rack)) for e in endpoints)
    return text + "}"
