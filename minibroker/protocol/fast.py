"""Hand-rolled codecs for the two hot messages: Produce requests (v3-12) and Fetch responses (v4-17).

kafka-python's generic codec copies every `records` field and builds one object per field; for a
1 MiB batch that is 37-130 µs to decode a Produce and ~170 µs to encode a Fetch response
(CONTRACTS.md, "Protocol notes"). Here:

- `decode_produce(body, version)` walks the request with `struct.unpack_from` and returns the record
  sets as memoryview slices of the request frame (no copy). Any inconsistency — a length running past
  the end, a negative length that is not a null, a bad varint, invalid UTF-8, trailing bytes — raises
  ProtocolViolation, which closes the connection exactly like `dispatch.decode_exact`.
- `encode_fetch_response(...)` returns the framed response as a list of buffers: small `bytes` prefixes
  and the stored batches' read-only memoryviews, for `transport.writelines()`. The bytes are identical
  to kafka-python's encoding of the same FetchResponse (tests/protocol/test_fast_codec.py checks this).
- `decode_fetch_response(body, version)` (v4-12) is the follower's side: the leader's response walked
  like a Produce request, each partition's records a memoryview of the response frame, the v12
  partition tags diverging_epoch and current_leader decoded (tests/protocol/test_fast_fetch_decode.py).

Only the fields minibroker reads or writes are modelled; unknown tagged fields are skipped on decode,
except the KIP-253 topic tag 10000 (`undeleted_partition_count`, int32), which is returned.
"""
from __future__ import annotations

import struct
from typing import Any, Literal, NamedTuple, Sequence, overload

from minibroker.protocol.framing import ProtocolViolation
from minibroker.protocol.framing import read_uvarint as _uvarint
from minibroker.protocol.gathered import Gathered
from minibroker.protocol.varint import uvarint_bytes as _uvarint_bytes  # one- and two-byte
# varints are also decoded inline below: hotter than a call per field on the Produce path

_i16 = struct.Struct(">h").unpack_from
_i32 = struct.Struct(">i").unpack_from
_ACKS_TIMEOUT = struct.Struct(">hi").unpack_from
_pack_i32 = struct.Struct(">i").pack
_PART_HEAD = struct.Struct(">ihqq")        # partition_index, error_code, high_watermark, last_stable_offset
_PART_HEAD5 = struct.Struct(">ihqqq")      # ... + log_start_offset (v5+)
_THROTTLE_ERR_SESSION = struct.Struct(">ihi")
_EPOCH_END = struct.Struct(">iqB")         # diverging_epoch body: epoch, end_offset, no tags
_LEADER_EPOCH = struct.Struct(">iiB")      # current_leader body: leader_id, leader_epoch, no tags
_ABORTED = struct.Struct(">qq")

KIP253_UNDELETED_PARTITION_COUNT_TAG = 10000


class ProducePartition(NamedTuple):
    index: int  # type: ignore[assignment]  # the wire name; shadows tuple.index on purpose
    records: memoryview | None          # zero-copy slice of the request frame; None for a null


class ProduceTopic(NamedTuple):
    name: str
    partitions: list[ProducePartition]
    undeleted_partition_count: int      # KIP-253 tag 10000 (v9+), -1 when absent


class ProduceRequestView(NamedTuple):
    version: int
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopic]


# ------------------------------------------------------------------------------------------ decoding

def _skip_tags(buf: memoryview, pos: int, end: int, want_count: bool = False) -> tuple[int, int]:
    """Skip a tagged-field section; returns (undeleted_partition_count or -1, new pos)."""
    if pos < end and buf[pos] == 0:     # no tags: the common case, without the varint loop
        return -1, pos + 1
    n, pos = _uvarint(buf, pos, end)
    count = -1
    for _ in range(n):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        if size > end - pos:
            raise ProtocolViolation("tagged field runs past the end of the message")
        if want_count and tag == KIP253_UNDELETED_PARTITION_COUNT_TAG:
            if size != 4:
                raise ProtocolViolation(f"tag {tag} of {size} bytes, expected 4")
            count = _i32(buf, pos)[0]
        pos += size
    return count, pos


@overload
def _string(buf: memoryview, pos: int, end: int, flexible: bool,
            nullable: Literal[False]) -> tuple[str, int]: ...
@overload
def _string(buf: memoryview, pos: int, end: int, flexible: bool,
            nullable: bool) -> tuple[str | None, int]: ...
def _string(buf: memoryview, pos: int, end: int, flexible: bool, nullable: bool) -> tuple[str | None, int]:
    if flexible:
        if pos < end and buf[pos] < 0x80:   # a one-byte varint (nearly always)
            n = buf[pos] - 1
            pos += 1
        else:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
    else:
        if end - pos < 2:
            raise ProtocolViolation("truncated string length")
        n = _i16(buf, pos)[0]
        pos += 2
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise ProtocolViolation(f"invalid string length {n}")
    if n > end - pos:
        raise ProtocolViolation("string runs past the end of the message")
    try:
        return str(buf[pos:pos + n], "utf-8"), pos + n
    except UnicodeDecodeError as e:
        raise ProtocolViolation(f"invalid UTF-8 in string: {e}") from None


@overload
def _records(buf: memoryview, pos: int, end: int, flexible: bool, what: str,
             gathered: None = None) -> tuple[memoryview | None, int]: ...
@overload
def _records(buf: memoryview, pos: int, end: int, flexible: bool, what: str,
             gathered: Gathered | None) -> tuple[memoryview | list[memoryview] | None, int]: ...
def _records(buf: memoryview, pos: int, end: int, flexible: bool, what: str,
             gathered: Gathered | None = None) -> tuple[memoryview | list[memoryview] | None, int]:
    """A records field (nullable bytes) at pos: a view of buf, no copy; None for a null. In a
    Gathered body, a record set views were cut out of is a list: those views, and views of buf
    for the small batches that came with the encoded bytes (Gathered.record_set)."""
    if flexible:
        if end - pos >= 2 and buf[pos] & 0x80 and not buf[pos + 1] & 0x80:    # 128 B - 16 KiB
            size = (buf[pos] & 0x7F | buf[pos + 1] << 7) - 1
            pos += 2
        else:
            size, pos = _uvarint(buf, pos, end)
            size -= 1
    else:
        if end - pos < 4:
            raise ProtocolViolation("truncated records length")
        size = _i32(buf, pos)[0]
        pos += 4
    if size < 0:
        if size != -1:
            raise ProtocolViolation(f"invalid records length {size}")
        return None, pos
    if gathered is not None and gathered.holes:
        try:
            handed = gathered.record_set(pos, size)
        except ValueError as e:
            raise ProtocolViolation(str(e)) from None
        if handed is not None:
            return handed
    if size > end - pos:
        raise ProtocolViolation(f"records run past the end of the {what}")
    return buf[pos:pos + size], pos + size


def _array_len(buf: memoryview, pos: int, end: int, flexible: bool, what: str) -> tuple[int, int]:
    if flexible:
        if pos < end and buf[pos] < 0x80:   # a one-byte varint (nearly always)
            n = buf[pos] - 1
            pos += 1
        else:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
    else:
        if end - pos < 4:
            raise ProtocolViolation(f"truncated {what} count")
        n = _i32(buf, pos)[0]
        pos += 4
    if n < 0:
        raise ProtocolViolation(f"invalid {what} count {n}")
    if n > end - pos:                   # every element takes at least one byte
        raise ProtocolViolation(f"{what} count {n} exceeds the message size")
    return n, pos


def decode_produce(body: memoryview, version: int) -> ProduceRequestView:
    """Decode a Produce request body (after the request header), v3-12, without copying records.

    A single-record round trip runs this cold, so the common encodings (no tags, one-byte array
    lengths, records lengths under 16 KiB) are read inline rather than through the helpers."""
    if not 3 <= version <= 12:
        raise ProtocolViolation(f"Produce v{version} is not decoded here")
    buf = body if isinstance(body, memoryview) else memoryview(body)
    end = len(buf)
    flexible = version >= 9
    try:
        transactional_id, pos = _string(buf, 0, end, flexible, nullable=True)
        if end - pos < 6:
            raise ProtocolViolation("truncated acks/timeout")
        acks, timeout_ms = _ACKS_TIMEOUT(buf, pos)
        pos += 6
        n_topics, pos = _array_len(buf, pos, end, flexible, "topic")
        topics = []
        for _ in range(n_topics):
            name, pos = _string(buf, pos, end, flexible, nullable=False)
            if flexible and pos < end and 1 <= buf[pos] < 0x80 and buf[pos] - 1 < end - pos:
                n_parts = buf[pos] - 1
                pos += 1
            else:
                n_parts, pos = _array_len(buf, pos, end, flexible, "partition")
            parts = []
            for _ in range(n_parts):
                if end - pos < 4:
                    raise ProtocolViolation("truncated partition index")
                index = _i32(buf, pos)[0]
                pos += 4
                records, pos = _records(buf, pos, end, flexible, "request")
                if flexible:
                    if pos < end and buf[pos] == 0:
                        pos += 1
                    else:
                        _, pos = _skip_tags(buf, pos, end)
                parts.append(ProducePartition(index, records))
            count = -1
            if flexible:
                if pos < end and buf[pos] == 0:
                    pos += 1
                else:
                    count, pos = _skip_tags(buf, pos, end, want_count=True)
            topics.append(ProduceTopic(name, parts, count))
        if flexible:
            if pos < end and buf[pos] == 0:
                pos += 1
            else:
                _, pos = _skip_tags(buf, pos, end)
        if pos != end:
            raise ProtocolViolation(f"decoded {pos} of {end} bytes (trailing garbage)")
    except ProtocolViolation as e:      # the shared helpers' messages do not name the message
        raise ProtocolViolation(f"Produce v{version}: {e}") from None
    return ProduceRequestView(version, transactional_id, acks, timeout_ms, topics)


# ------------------------------------------------------------------------------------------ encoding

class FetchPartition(NamedTuple):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: Sequence[bytes | memoryview] | None     # buffers sent back to back, or None (a null)
    diverging_epoch: tuple[int, int] | None = None   # (epoch, end_offset), v12 tag 0
    aborted_transactions: Sequence[tuple[int, int]] | None = None   # (producer_id, first_offset)
    preferred_read_replica: int = -1
    current_leader: tuple[int, int] | None = None   # (leader_id, leader_epoch), v12 tag 1 (KIP-951)


class NodeEndpoint(NamedTuple):
    """FetchResponse v16+ top-level tag 0 (KIP-951): the current leaders' endpoints."""
    node_id: int
    host: str
    port: int
    rack: str | None


def _compact_string(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    raw = s.encode("utf-8")
    return _uvarint_bytes(len(raw) + 1) + raw


def node_endpoints_tag(endpoints: Sequence[NodeEndpoint]) -> bytes:
    """The top-level tag section carrying NodeEndpoints (tag 0 of Fetch v16+ and Produce v10+)."""
    body = bytearray(_uvarint_bytes(len(endpoints) + 1))
    for e in endpoints:
        body += _pack_i32(e.node_id) + _compact_string(e.host) + _pack_i32(e.port)
        body += _compact_string(e.rack) + b"\x00"
    return b"\x01\x00" + _uvarint_bytes(len(body)) + bytes(body)


def _fetch_response_head(version: int, correlation_id: int, throttle_time_ms: int,
                         error_code: int, session_id: int, topic_count: int) -> bytearray:
    """A Fetch response's header and body up to its topics' count (encode_fetch_response)."""
    flexible = version >= 12
    cur = bytearray(_pack_i32(correlation_id))
    if flexible:
        cur.append(0)                                   # response header v1: no tags
    if version >= 7:
        cur += _THROTTLE_ERR_SESSION.pack(throttle_time_ms, error_code, session_id)
    else:
        cur += _pack_i32(throttle_time_ms)
    cur += _uvarint_bytes(topic_count + 1) if flexible else _pack_i32(topic_count)
    return cur


def encode_fetch_response(version: int, correlation_id: int, throttle_time_ms: int, error_code: int,
                          session_id: int, topics: Sequence[tuple[Any, Sequence[FetchPartition]]],
                          node_endpoints: Sequence[NodeEndpoint] = ()) -> list[bytes | memoryview]:
    """The whole framed Fetch response (size, header, body) as buffers for writelines(), v4-17.
    `topics`: (name, partitions), or from v13 (topic id as a uuid.UUID, partitions): Any, as the
    version alone says which."""
    if not 4 <= version <= 17:
        raise ValueError(f"Fetch v{version} is not encoded here")
    flexible = version >= 12
    by_id = version >= 13
    out: list[bytes | memoryview] = []
    cur = _fetch_response_head(version, correlation_id, throttle_time_ms, error_code, session_id,
                               len(topics))
    total = 0
    for name, parts in topics:
        if by_id:
            cur += name.bytes
        else:
            raw = name.encode("utf-8")
            if flexible:
                cur += _uvarint_bytes(len(raw) + 1)
            else:
                cur += struct.pack(">h", len(raw))
            cur += raw
        cur += _uvarint_bytes(len(parts) + 1) if flexible else _pack_i32(len(parts))
        for p in parts:
            if version >= 5:
                cur += _PART_HEAD5.pack(p.partition_index, p.error_code, p.high_watermark,
                                        p.last_stable_offset, p.log_start_offset)
            else:
                cur += _PART_HEAD.pack(p.partition_index, p.error_code, p.high_watermark,
                                       p.last_stable_offset)
            aborted = p.aborted_transactions
            if aborted is None:
                cur += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                cur += _uvarint_bytes(len(aborted) + 1) if flexible else _pack_i32(len(aborted))
                for producer_id, first_offset in aborted:
                    cur += _ABORTED.pack(producer_id, first_offset)
                    if flexible:
                        cur.append(0)
            if version >= 11:
                cur += _pack_i32(p.preferred_read_replica)
            records = p.records
            if records is None:
                cur += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                size = 0
                for r in records:
                    size += len(r)
                cur += _uvarint_bytes(size + 1) if flexible else _pack_i32(size)
                if size:
                    out.append(bytes(cur))
                    out.extend(records)
                    total += len(cur) + size
                    cur = bytearray()
            if flexible:
                div = p.diverging_epoch
                leader = p.current_leader
                if div is None and leader is None:
                    cur.append(0)
                else:
                    cur.append((div is not None) + (leader is not None))
                    if div is not None:
                        cur += b"\x00\x0d"                 # tag 0, 13 bytes
                        cur += _EPOCH_END.pack(div[0], div[1], 0)
                    if leader is not None:
                        cur += b"\x01\x09"                 # tag 1, 9 bytes
                        cur += _LEADER_EPOCH.pack(leader[0], leader[1], 0)
        if flexible:
            cur.append(0)                               # topic tags
    if node_endpoints and version >= 16:
        cur += node_endpoints_tag(node_endpoints)
    elif flexible:
        cur.append(0)                                   # top-level tags
    out.append(bytes(cur))
    total += len(cur)
    out.insert(0, _pack_i32(total))
    return out


# ------------------------------------------------------------------ decoding Fetch responses (follower)
# The replica fetcher's side of replication: the leader's FetchResponse walked in place, records
# handed on as views of the response frame. kafka-python's generic decode copied every batch into
# `bytes` (30% of a replicating broker's CPU); the log copies what it keeps anyway.

_EPOCH_END_OFFSET = struct.Struct(">iq")    # EpochEndOffset: epoch, end_offset
_LEADER_ID_EPOCH = struct.Struct(">ii")     # LeaderIdAndEpoch: leader_id, leader_epoch
_DIVERGING_EPOCH_TAG = 0
_CURRENT_LEADER_TAG = 1                     # tag 2 (snapshot_id) is skipped like any unknown tag


class EpochEndOffset(NamedTuple):
    epoch: int
    end_offset: int


class LeaderIdAndEpoch(NamedTuple):
    leader_id: int
    leader_epoch: int


class FetchPartitionView(NamedTuple):
    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int                            # -1 before v5
    diverging_epoch: EpochEndOffset | None           # v12 tag 0
    current_leader: LeaderIdAndEpoch | None          # v12 tag 1
    aborted_transactions: list[tuple[int, int]] | None   # (producer_id, first_offset)
    preferred_read_replica: int                      # -1 before v11
    records: memoryview | list[memoryview] | None    # zero-copy slice of the response frame, or
                                                     # the views a Gathered one handed over


class FetchTopicView(NamedTuple):
    topic: str
    partitions: list[FetchPartitionView]


class FetchResponseView(NamedTuple):
    version: int
    throttle_time_ms: int
    error_code: int                                  # 0 before v7
    session_id: int                                  # 0 before v7
    responses: list[FetchTopicView]


def _tagged_struct(buf: memoryview, pos: int, end: int, head: struct.Struct, what: str
                   ) -> tuple[int, ...]:
    """A flexible struct held in a tagged field of buf[pos:end]: fixed fields, its own tags, and
    nothing after them (the tag's size must match)."""
    if end - pos < head.size:
        raise ProtocolViolation(f"truncated {what}")
    fields = head.unpack_from(buf, pos)
    _, pos = _skip_tags(buf, pos + head.size, end)
    if pos != end:
        raise ProtocolViolation(f"{what} tag has {end - pos} bytes left over")
    return fields


def _partition_tags(buf: memoryview, pos: int, end: int
                    ) -> tuple[EpochEndOffset | None, LeaderIdAndEpoch | None, int]:
    """A v12 partition's tagged fields: diverging_epoch and current_leader decoded, others skipped."""
    n, pos = _uvarint(buf, pos, end)
    diverging: EpochEndOffset | None = None
    leader: LeaderIdAndEpoch | None = None
    for _ in range(n):
        tag, pos = _uvarint(buf, pos, end)
        size, pos = _uvarint(buf, pos, end)
        if size > end - pos:
            raise ProtocolViolation("tagged field runs past the end of the response")
        if tag == _DIVERGING_EPOCH_TAG:
            diverging = EpochEndOffset(*_tagged_struct(buf, pos, pos + size, _EPOCH_END_OFFSET,
                                                       "diverging_epoch"))
        elif tag == _CURRENT_LEADER_TAG:
            leader = LeaderIdAndEpoch(*_tagged_struct(buf, pos, pos + size, _LEADER_ID_EPOCH,
                                                      "current_leader"))
        pos += size
    return diverging, leader, pos


def decode_fetch_response(body: memoryview | Gathered, version: int) -> FetchResponseView:
    """Decode a Fetch response body (after the response header), v4-12, without copying records.

    Every record set is a slice of `body`: the caller must drop the result (and `body`) once the
    records are stored, or the receive buffer behind them cannot be reused (framing.FrameReader).
    A Gathered body's record sets cut out of it are lists of the views handed over."""
    if not 4 <= version <= 12:
        raise ProtocolViolation(f"Fetch response v{version} is not decoded here")
    gathered: Gathered | None = None
    if type(body) is Gathered:
        gathered = body
        body = body.frame
    buf = body if isinstance(body, memoryview) else memoryview(body)
    try:
        return _decode_fetch_response(buf, version, gathered)
    except ProtocolViolation as e:     # the shared helpers' messages do not name the message
        raise ProtocolViolation(f"Fetch response v{version}: {e}") from None


def _decode_fetch_response(buf: memoryview, version: int, gathered: Gathered | None
                           ) -> FetchResponseView:
    end = len(buf)
    flexible = version >= 12
    if version >= 7:
        if end < 10:
            raise ProtocolViolation("truncated throttle_time_ms/error_code/session_id")
        throttle_time_ms, error_code, session_id = _THROTTLE_ERR_SESSION.unpack_from(buf, 0)
        pos = 10
    else:
        if end < 4:
            raise ProtocolViolation("truncated throttle_time_ms")
        throttle_time_ms = _i32(buf, 0)[0]
        error_code = session_id = 0
        pos = 4
    head = _PART_HEAD5 if version >= 5 else _PART_HEAD
    head_size = head.size
    unpack_head = head.unpack_from
    n_topics, pos = _array_len(buf, pos, end, flexible, "topic")
    responses = []
    for _ in range(n_topics):
        topic, pos = _string(buf, pos, end, flexible, nullable=False)
        n_parts, pos = _array_len(buf, pos, end, flexible, "partition")
        parts = []
        for _ in range(n_parts):
            if end - pos < head_size:
                raise ProtocolViolation("truncated partition header")
            if version >= 5:
                index, err, hw, lso, log_start = unpack_head(buf, pos)
            else:
                index, err, hw, lso = unpack_head(buf, pos)
                log_start = -1
            pos += head_size
            # aborted_transactions: a nullable array
            if flexible:
                n, after = _uvarint(buf, pos, end)
                is_null = n == 0
            else:
                if end - pos < 4:
                    raise ProtocolViolation("truncated aborted_transactions count")
                is_null = _i32(buf, pos)[0] == -1
                after = pos + 4
            if is_null:
                aborted = None
                pos = after
            else:
                n, pos = _array_len(buf, pos, end, flexible, "aborted transaction")
                aborted = []
                for _ in range(n):
                    if end - pos < 16:
                        raise ProtocolViolation("truncated aborted transaction")
                    aborted.append(_ABORTED.unpack_from(buf, pos))
                    pos += 16
                    if flexible:
                        _, pos = _skip_tags(buf, pos, end)
            if version >= 11:
                if end - pos < 4:
                    raise ProtocolViolation("truncated preferred_read_replica")
                preferred = _i32(buf, pos)[0]
                pos += 4
            else:
                preferred = -1
            records, pos = _records(buf, pos, end, flexible, "response", gathered)
            diverging = leader = None
            if flexible:
                diverging, leader, pos = _partition_tags(buf, pos, end)
            parts.append(FetchPartitionView(index, err, hw, lso, log_start, diverging, leader,
                                            aborted, preferred, records))
        if flexible:
            _, pos = _skip_tags(buf, pos, end)
        responses.append(FetchTopicView(topic, parts))
    if flexible:
        _, pos = _skip_tags(buf, pos, end)
    if pos != end:
        raise ProtocolViolation(f"decoded {pos} of {end} bytes (trailing garbage)")
    return FetchResponseView(version, throttle_time_ms, error_code, session_id, responses)
