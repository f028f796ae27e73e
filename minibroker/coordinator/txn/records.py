"""__transaction_state records, in Kafka's format (TransactionLogKey / TransactionLogValue v0).

key:   int16 version 0 | string transactional_id
value: int16 version 0 | int64 producer_id | int16 producer_epoch | int32 transaction_timeout_ms |
       int8 state | [string topic | [int32 partition]] | int64 last_update_ms | int64 start_ms
A None value is a tombstone (the id expired). State bytes are Kafka's TransactionState ids.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT, DEAD, \
    PREPARE_EPOCH_FENCE = range(8)
STATE_NAMES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
               "CompleteAbort", "Dead", "PrepareEpochFence")

_H = struct.Struct(">h")
_VALUE_HEAD = struct.Struct(">hqhib")
_I32 = struct.Struct(">i")
_TAIL = struct.Struct(">qq")


class TxnRecord(NamedTuple):
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: tuple[tuple[str, int], ...]     # sorted (topic, partition)
    last_update_ms: int
    start_ms: int


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _H.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _H.pack(0) + _string(transactional_id)


def decode_key(data: bytes) -> str:
    (n,) = _H.unpack_from(data, 2)
    return bytes(data[4:4 + n]).decode("utf-8")


def encode_value(r: TxnRecord) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(r.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_VALUE_HEAD.pack(0, r.producer_id, r.producer_epoch, r.timeout_ms, r.state))
    out += _I32.pack(len(by_topic))
    for topic, parts in by_topic.items():
        out += _string(topic) + _I32.pack(len(parts))
        for p in parts:
            out += _I32.pack(p)
    out += _TAIL.pack(r.last_update_ms, r.start_ms)
    return bytes(out)


def decode_value(data: bytes) -> TxnRecord:
    try:
        _, pid, epoch, timeout, state = _VALUE_HEAD.unpack_from(data, 0)
        pos = _VALUE_HEAD.size
        (ntopics,) = _I32.unpack_from(data, pos)
        pos += 4
        partitions = []
        for _ in range(ntopics):
            (n,) = _H.unpack_from(data, pos)
            topic = bytes(data[pos + 2:pos + 2 + n]).decode("utf-8")
            pos += 2 + n
            (nparts,) = _I32.unpack_from(data, pos)
            pos += 4
            for _ in range(nparts):
                partitions.append((topic, _I32.unpack_from(data, pos)[0]))
                pos += 4
        last_update, start = _TAIL.unpack_from(data, pos)
    except (struct.error, UnicodeDecodeError) as e:
        raise ValueError(f"undecodable transaction log value: {e}") from None
    return TxnRecord(pid, epoch, timeout, state, tuple(partitions), last_update, start)
