"""`minibroker transactions` as kafka-transactions.sh: Kafka's padded columns, a duration for an
open transaction, find-hanging and abort."""
from __future__ import annotations

import pytest
from confluent_kafka import Producer

from serve_helpers import run_main
from minibroker.testing import ThreadedCluster

pytestmark = [pytest.mark.real_time, pytest.mark.timeout(180)]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    return run_main(capsys, *argv)


def table(out: str) -> list[dict[str, str]]:
    lines = out.splitlines()
    head = [h.strip() for h in lines[0].split("\t")[:-1]]
    assert all(ln.endswith("\t") for ln in lines)         # every cell ends with a tab
    return [dict(zip(head, (c.strip() for c in ln.split("\t")[:-1]))) for ln in lines[1:]]


def test_open_transaction_described_then_aborted(capsys):
    with ThreadedCluster(brokers=1, transaction_state_log_replication_factor=1,
                         transaction_state_log_min_isr=1) as c:
        c.create_topic("pay", 1, 1)
        p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": "tx-1"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("pay", b"v", partition=0)
        assert p.flush(30) == 0
        b = ("transactions", "--bootstrap-server", c.bootstrap)
        [row] = table(run(capsys, *b, "describe", "--transactional-id", "tx-1")[1])
        assert row["TransactionState"] == "Ongoing" and row["TopicPartitions"] == "pay-0"
        assert int(row["TransactionDurationMs"]) >= 0          # not None while one is open
        assert int(row["CurrentTransactionStartTimeMs"]) > 0
        [prod] = table(run(capsys, *b, "describe-producers", "--topic", "pay", "--partition",
                           "0")[1])
        assert prod["CurrentTransactionStartOffset"] == "0"
        # Open but known to its coordinator: not hanging.
        code, out, _ = run(capsys, *b, "find-hanging", "--topic", "pay",
                           "--max-transaction-timeout", "0")
        assert code == 0 and table(out) == []
        assert run(capsys, *b, "list")[1].splitlines()[0].split("\t")[0].strip() == \
            "TransactionalId"
        assert run(capsys, *b, "abort", "--topic", "pay", "--partition", "0", "--start-offset",
                   "0")[0] == 0
        [prod] = table(run(capsys, *b, "describe-producers", "--topic", "pay", "--partition",
                           "0")[1])
        assert prod["CurrentTransactionStartOffset"] == "None"
        code, _, err = run(capsys, *b, "abort", "--topic", "pay", "--partition", "0",
                           "--start-offset", "0")
        assert code == 1 and "Could not find any open transactions starting at offset 0" in err
        code, _, err = run(capsys, *b, "find-hanging")
        assert code == 1 and "requires either --topic or --broker-id" in err
