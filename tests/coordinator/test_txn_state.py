"""__transaction_state records (Kafka's TransactionLogKey/Value v0) and their replay into a
coordinator shard: the state a broker rebuilds when it takes over a partition."""
from __future__ import annotations

import pytest

from minibroker.coordinator.txn.records import (
    COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_COMMIT, TxnRecord, decode_key, decode_value, encode_key,
    encode_value,
)
from minibroker.coordinator.txn.state import TxnShard, replay


def test_records_round_trip_in_kafkas_layout():
    r = TxnRecord(42, 3, 60000, ONGOING, (("a", 0), ("a", 2), ("b", 1)), 1000, 900)
    value = encode_value(r)
    assert decode_value(value) == r
    assert value[:2] == b"\x00\x00"                  # value version 0
    assert encode_key("tid") == b"\x00\x00\x00\x03tid"
    assert decode_key(encode_key("tid")) == "tid"
    with pytest.raises(ValueError):
        decode_value(value[:20])


def test_replay_rebuilds_each_id_and_remembers_the_previous_producer():
    shard = TxnShard(0, leader_epoch=5)
    steps = [TxnRecord(7, 0, 60000, EMPTY, (), 1, -1),
             TxnRecord(7, 0, 60000, ONGOING, (("t", 0),), 2, 2),
             TxnRecord(7, 0, 60000, PREPARE_COMMIT, (("t", 0),), 3, 2),
             TxnRecord(7, 0, 60000, COMPLETE_COMMIT, (), 4, 2),
             TxnRecord(7, 1, 60000, EMPTY, (), 5, -1)]          # InitProducerId: epoch bumped
    for r in steps:
        replay(shard, encode_key("tid"), encode_value(r))
    txn = shard.txns["tid"]
    assert (txn.producer_id, txn.producer_epoch, txn.state_name, txn.partitions) == (7, 1, "Empty", set())
    assert (txn.last_producer_id, txn.last_producer_epoch) == (7, 0)
    replay(shard, encode_key("tid"), None)                      # expired: a tombstone
    assert shard.txns == {}
