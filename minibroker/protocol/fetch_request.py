"""A follower's FetchRequest v12, encoded by hand.

The replica fetcher sends one per fetch, several per acks=all write at RF 3; kafka-python's generic
encoder built it from request objects field by field (~150 Python calls each: docs/performance.md).
The bytes are identical to kafka-python's (tests/protocol/test_fetch_request.py). v12's tagged
fields (cluster_id) are left unset, as the fetcher's request left them. The fetcher keeps a fetch
session with its leader (KIP-227, as Kafka's followers do): its requests carry the session id and
epoch, only the partitions whose fetch state changed, and the partitions it stopped following.
"""
from __future__ import annotations

import struct
from typing import Iterable

from minibroker.protocol.varint import uvarint_bytes

VERSION = 12
API_KEY = 1
_HEAD = struct.Struct(">iiiibii")    # replica_id, max_wait_ms, min_bytes, max_bytes, isolation, session id, epoch
# partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
# partition_max_bytes, no tagged fields
_PART = struct.Struct(">iiqiqiB")
_I32 = struct.Struct(">i")
_EMPTY_TAIL = b"\x01\x00"           # rack_id "", no tagged fields


def encode_follower_fetch(replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int,
                          topics: Iterable[tuple[str, list[tuple[int, int, int, int, int, int]]]],
                          session_id: int = 0, session_epoch: int = -1,
                          forgotten: Iterable[tuple[str, list[int]]] = ()) -> bytes:
    """A FetchRequest v12 body (read_uncommitted, no rack). `topics`: (name, [(partition,
    current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
    partition_max_bytes)]) in request order; `forgotten`: (name, [partition]). Session epoch -1
    is a session-less full fetch, 0 opens a session, >= 1 is an incremental fetch in one."""
    topics = list(topics)
    out = [_HEAD.pack(replica_id, max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch),
           uvarint_bytes(len(topics) + 1)]
    pack = _PART.pack
    for name, parts in topics:
        raw = name.encode()
        out += (uvarint_bytes(len(raw) + 1), raw, uvarint_bytes(len(parts) + 1))
        out += [pack(*p, 0) for p in parts]
        out.append(b"\x00")         # the topic's tagged fields
    forgotten = list(forgotten)
    out.append(uvarint_bytes(len(forgotten) + 1))
    for name, pids in forgotten:
        raw = name.encode()
        out += (uvarint_bytes(len(raw) + 1), raw, uvarint_bytes(len(pids) + 1))
        out += [_I32.pack(pid) for pid in pids]
        out.append(b"\x00")
    out.append(_EMPTY_TAIL)
    return b"".join(out)
