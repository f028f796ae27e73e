"""Any request's answer with one error code everywhere: Kafka's AbstractRequest.getErrorResponse.

Built from the schemas, so it works for every API: the response's error_code fields get the code,
and its per-item arrays mirror the request's (each topic / partition / group / key asked about
comes back, named by its key field, with the error). Offsets, epochs, watermarks, leader and node
ids, ports and timestamps without a schema default answer -1 (unknown), as Kafka's error responses
do; every other field keeps its schema default. Used for injected faults (broker/faults.py), a
cold path.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from minibroker.network.client import response_class_for

# Key fields copied from a request item into its answer (by name, else by the alias group).
_PARTITION_KEYS = ("partition_index", "partition", "index")
_KEY_ENTITIES = ("topicName", "groupId", "transactionalId")
_UNKNOWN_IS_MINUS_ONE = ("offset", "watermark", "epoch", "leader", "timestamp", "node_id", "port")
# The schema's fields, classes and items below are kafka-python's (untyped: Any).


def error_response(req: Any, version: int, error_code: int, message: str | None = None) -> Any:
    """The response to `req` at `version` with `error_code` in each of its error fields (and
    `message` in each error_message, as Kafka's getErrorResponse of an exception with one)."""
    rcls = response_class_for(req)
    return _build(rcls, rcls._struct._fields, req, type(req)._struct._fields, version,
                  error_code, message)


def _arrays(fields: Sequence[Any], version: int) -> list[Any]:
    return [f for f in fields if f.is_struct_array() and f.for_version_q(version)
            and not f.tagged_field_q(version)]


def _keys(f: Any) -> set[str]:
    """What an array's items are keyed by: their topic / group / partition fields."""
    out = {g._entity_type for g in f._fields if g._entity_type in _KEY_ENTITIES}
    if any(g.name in _PARTITION_KEYS for g in f._fields):
        out.add("partition")
    return out


def _pair(rf: Any, r_arrays: list[Any], q_arrays: list[Any]) -> Any:
    """The request array a response array answers: same name, else the only one, else the one
    whose items have the same key fields."""
    for q in q_arrays:
        if q.name == rf.name:
            return q
    if len(r_arrays) == 1 and len(q_arrays) == 1:
        return q_arrays[0]
    keys = _keys(rf)
    same = [q for q in q_arrays if keys and _keys(q) == keys]
    return same[0] if len(same) == 1 else None


def _from_keys(rf: Any, item_class: Any, item: Any, q_fields: Sequence[Any], version: int,
               code: int) -> list[Any]:
    """A response array answering a request's plain list of keys (FindCoordinator v4's
    coordinator_keys, DescribeGroups' groups, OffsetFetch's partition_indexes): one item per key,
    named by the item's key field. Empty unless both sides are unambiguous."""
    lists = [q for q in q_fields if q.is_array() and not q.is_struct_array()
             and q.for_version_q(version) and not q.tagged_field_q(version)]
    key = next((g for g in rf._fields if g.name == "key" or g.name in _PARTITION_KEYS
                or g._entity_type in _KEY_ENTITIES), None)
    if len(lists) != 1 or key is None:
        return []
    out: list[Any] = []
    for value in getattr(item, lists[0].name, None) or ():
        answer = _build(item_class, rf._fields, None, (), version, code)
        setattr(answer, key.name, value)
        out.append(answer)
    return out


def _source(rf: Any, q_fields: Sequence[Any], version: int) -> Any:
    """The request field a response scalar copies: a key field of the same name, entity or role."""
    if rf._entity_type not in _KEY_ENTITIES and rf.name not in _PARTITION_KEYS \
            and rf.name != "topic_id":
        return None
    scalars = [q for q in q_fields if not q.is_array() and not q.is_struct() and q.for_version_q(version)]
    for q in scalars:
        if q.name == rf.name:
            return q
    for q in scalars:
        if (rf._entity_type in _KEY_ENTITIES and q._entity_type == rf._entity_type) or \
                (rf.name in _PARTITION_KEYS and q.name in _PARTITION_KEYS):
            return q
    return None


def _build(data_class: Any, r_fields: Sequence[Any], item: Any, q_fields: Sequence[Any],
           version: int, code: int, message: str | None = None) -> Any:
    kw: dict[str, Any] = {}
    r_arrays, q_arrays = _arrays(r_fields, version), _arrays(q_fields, version)
    for f in r_fields:
        if not f.for_version_q(version):
            continue
        if f.name == "error_code":
            kw[f.name] = code
        elif f.name == "error_message" and message is not None:
            kw[f.name] = message
        elif f.is_struct_array():
            q = _pair(f, r_arrays, q_arrays) if f in r_arrays else None
            items = (getattr(item, q.name, None) or ()) if q is not None else ()
            # Nested item classes hang off their parent's class, by type name.
            item_class = f.data_class or getattr(data_class, f._type_str.removeprefix("[]"))
            if q is not None:
                kw[f.name] = [_build(item_class, f._fields, i, q._fields, version, code, message)
                              for i in items]
            elif f in r_arrays and item is not None:
                kw[f.name] = _from_keys(f, item_class, item, q_fields, version, code)
        elif not f.is_array() and not f.is_struct():
            src = _source(f, q_fields, version)
            if src is not None:
                kw[f.name] = getattr(item, src.name)
            elif f._type_str.startswith("int") and f._json.get("default") is None and \
                    any(w in f.name for w in _UNKNOWN_IS_MINUS_ONE):
                kw[f.name] = -1
    return data_class(**kw)
