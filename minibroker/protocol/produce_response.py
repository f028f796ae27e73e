"""ProduceResponse v3-12, encoded by hand: a single-record acks=all round trip spent a third of its
broker time building and encoding kafka-python's generic response objects.

The output is byte-identical to kafka-python's `ProduceResponse.encode` (tests/protocol/test_fast_codec.py).
KIP-951 (v10+): a partition answered NOT_LEADER_OR_FOLLOWER carries current_leader (tag 0) and the
response the leaders' node_endpoints (tag 0); left out otherwise, as the generic encoder leaves out
their defaults.
"""
from __future__ import annotations

import struct

from minibroker.protocol.fast import NodeEndpoint, node_endpoints_tag
from minibroker.protocol.varint import SMALL_UVARINTS as _SMALL
from minibroker.protocol.varint import uvarint_bytes as _uvarint

_I32 = struct.Struct(">i")
_HEADER_FLEX = struct.Struct(">iix")        # size, correlation id, empty header tags (v1 header)
_HEADER = struct.Struct(">ii")              # size, correlation id
_PART_V3 = struct.Struct(">ihqq")           # index, error_code, base_offset, log_append_time_ms
_PART_V5 = struct.Struct(">ihqqq")          # ... log_start_offset
_CURRENT_LEADER_TAG = struct.Struct(">BBBiiB")   # 1 tag: tag 0, 9 bytes: leader id, epoch, no tags




class PartitionResult:
    """One partition's answer; handlers fill it, then may set error_code after waiting."""
    __slots__ = ("index", "error_code", "base_offset", "log_append_time_ms", "log_start_offset",
                 "error_message", "record_errors", "current_leader")

    def __init__(self, index: int, error_code: int, base_offset: int = -1,
                 log_append_time_ms: int = -1, log_start_offset: int = -1,
                 error_message: str | None = None,
                 record_errors: list[tuple[int, str | None]] | None = None) -> None:
        self.index = index
        self.error_code = error_code
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self.log_start_offset = log_start_offset
        self.error_message = error_message
        self.record_errors = record_errors      # KIP-467 (v8+): (batch index, message) per record
        self.current_leader: tuple[int, int] | None = None   # KIP-951 (v10+): (leader id, epoch)


def _string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    raw = s.encode()
    return (_uvarint(len(raw) + 1) if flexible else len(raw).to_bytes(2, "big")) + raw


def _count(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else _I32.pack(n)


def _record_errors(errors: list[tuple[int, str | None]], flexible: bool) -> bytes:
    out = [_count(len(errors), flexible)]
    for index, message in errors:
        out.append(_I32.pack(index) + _string(message, flexible) + (b"\x00" if flexible else b""))
    return b"".join(out)


_NAMES: dict[tuple[str, bool], bytes] = {}     # encoded topic names (a broker's topics are few)
_NO_RECORD_ERRORS = {False: _I32.pack(0), True: b"\x01"}
_NO_MESSAGE = {False: _I32.pack(0) + b"\xff\xff", True: b"\x01\x00"}   # no record_errors, null message


def encode_produce_response(version: int, correlation_id: int,
                            topics: dict[str, list[PartitionResult]],
                            throttle_time_ms: int = 0,
                            node_endpoints: list[NodeEndpoint] | None = None) -> list[bytes]:
    """The framed response (size prefix, header, body) as buffers for transport.writelines().
    A single-record round trip runs this cold: counts are inlined and topic names cached."""
    flexible = version >= 9
    out = [b"", _SMALL[len(topics) + 1] if flexible and len(topics) < 0x7F else _count(len(topics), flexible)]
    part = _PART_V5 if version >= 5 else _PART_V3
    for name, parts in topics.items():
        key = (name, flexible)
        encoded = _NAMES.get(key)
        if encoded is None:
            encoded = _string(name, flexible)
            if len(_NAMES) < 10000:
                _NAMES[key] = encoded
        out.append(encoded)
        out.append(_SMALL[len(parts) + 1] if flexible and len(parts) < 0x7F else _count(len(parts), flexible))
        for p in parts:
            if version >= 5:
                out.append(part.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms,
                                     p.log_start_offset))
            else:
                out.append(part.pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms))
            if version >= 8:
                # record_errors (KIP-467: the records that made the batch fail), error_message.
                if p.record_errors:
                    out.append(_record_errors(p.record_errors, flexible)
                               + _string(p.error_message, flexible))
                else:
                    out.append(_NO_MESSAGE[flexible] if p.error_message is None else
                               _NO_RECORD_ERRORS[flexible] + _string(p.error_message, flexible))
            if flexible:
                leader = p.current_leader
                out.append(b"\x00" if leader is None or version < 10 else
                           _CURRENT_LEADER_TAG.pack(1, 0, 9, leader[0], leader[1], 0))
        if flexible:
            out.append(b"\x00")
    if node_endpoints and version >= 10:
        out.append(_I32.pack(throttle_time_ms) + node_endpoints_tag(node_endpoints))
    else:
        out.append(_I32.pack(throttle_time_ms) + (b"\x00" if flexible else b""))
    body = b"".join(out)
    header = _HEADER_FLEX if flexible else _HEADER
    return [header.pack(header.size - 4 + len(body), correlation_id), body]
