"""A transaction left open past its timeout is aborted by the broker (Kafka's
transaction.abort.timed.out.transaction.cleanup.interval.ms; 200 ms in this cluster).

A confluent-kafka producer (transaction.timeout.ms=5000) writes three records in a transaction and
goes quiet. Meanwhile a plain record written after them stays invisible at read_committed (the
open transaction holds the last stable offset). The broker then aborts the transaction with a
bumped epoch: DescribeTransactions shows CompleteAbort, the plain record becomes readable at
read_committed while the three never do, and the producer's late commit fails as fenced/abortable.
`minibroker transactions` (kafka-transactions.sh's list / describe / describe-producers) shows the
same along the way.
"""
from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import pytest
from kafka.protocol.admin import DescribeTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from conformance.checks import poll_values
from minibroker.network.client import KafkaClientConnection
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.fault, pytest.mark.clients("confluent"), pytest.mark.timeout(120)]

TID = "left-open"


def _describe(bs: str, tid: str) -> tuple[str, int]:
    """(state, producer epoch) of `tid`, asked of its coordinator over the wire."""
    async def run():
        host, port = bs.split(",")[0].rsplit(":", 1)
        conn = await KafkaClientConnection.connect(host, int(port))
        try:
            fc = await conn.request(FindCoordinatorRequest(key=tid, key_type=1), 2)
            assert fc.error_code == 0, fc
        finally:
            conn.close()
        coord = await KafkaClientConnection.connect(fc.host, fc.port)
        try:
            r = await coord.request(DescribeTransactionsRequest(transactional_ids=[tid]), 0)
        finally:
            coord.close()
        [s] = r.transaction_states
        assert s.error_code == 0, s
        return s.transaction_state, s.producer_epoch
    return asyncio.run(run())


def _cli(bs: str, *args: str) -> list[dict[str, str]]:
    """`minibroker transactions` rows as dicts by Kafka's column names."""
    r = subprocess.run([sys.executable, "-m", "minibroker", "transactions", "--bootstrap-server",
                        bs, *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    head, *lines = r.stdout.splitlines()
    names = [h.strip() for h in head.split("\t")]         # Kafka pads its columns
    return [dict(zip(names, (v.strip() for v in ln.split("\t")))) for ln in lines]


def _committed_values(bs: str, seconds: float) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bs, "group.id": "timeout-reader",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    c.assign([TopicPartition("t", 0, 0)])
    try:
        return poll_values(c, seconds)
    finally:
        c.close()


def test_a_transaction_open_past_its_timeout_is_aborted_by_the_broker():
    from confluent_kafka import KafkaException, Producer
    with ThreadedCluster(brokers=3, transaction_state_log_num_partitions=2,
                         transaction_abort_timed_out_transaction_cleanup_interval_ms=200) as c:
        c.create_topic("t", 1, 3)
        p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": TID,
                      "transaction.timeout.ms": 5000})
        p.init_transactions(30)
        p.begin_transaction()
        for v in (b"open-0", b"open-1", b"open-2"):
            p.produce("t", value=v, partition=0)
        assert p.flush(30) == 0
        assert _describe(c.bootstrap, TID)[0] == "Ongoing"
        [producer] = _cli(c.bootstrap, "describe-producers", "--topic", "t", "--partition", "0")
        assert (producer["ProducerEpoch"], producer["CurrentTransactionStartOffset"]) == ("0", "0")
        plain = Producer({"bootstrap.servers": c.bootstrap})
        plain.produce("t", value=b"after", partition=0)
        assert plain.flush(30) == 0
        state = epoch = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            state, epoch = _describe(c.bootstrap, TID)
            if state == "CompleteAbort":
                break
            time.sleep(0.2)
        assert (state, epoch) == ("CompleteAbort", 1), "the broker did not abort it (epoch bumped)"
        assert _committed_values(c.bootstrap, 3.0) == [b"after"]
        [listed] = [r for r in _cli(c.bootstrap, "list") if r["TransactionalId"] == TID]
        assert listed["TransactionState"] == "CompleteAbort"
        [described] = _cli(c.bootstrap, "describe", "--transactional-id", TID)
        assert (described["ProducerEpoch"], described["TransactionState"],
                described["TopicPartitions"]) == ("1", "CompleteAbort", "")
        [producer] = _cli(c.bootstrap, "describe-producers", "--topic", "t", "--partition", "0")
        assert (producer["ProducerEpoch"], producer["CurrentTransactionStartOffset"]) == ("1", "None")
        with pytest.raises(KafkaException) as late:
            p.commit_transaction(30)
        err = late.value.args[0]
        assert err.fatal() or err.txn_requires_abort(), err
