"""`minibroker transactions` — kafka-transactions.sh's list / describe / describe-producers.

    minibroker transactions --bootstrap-server 127.0.0.1:9092 list
    minibroker transactions --bootstrap-server ... describe --transactional-id T
    minibroker transactions --bootstrap-server ... describe-producers --topic T --partition P

list asks every broker (ListTransactions), describe the id's coordinator (FindCoordinator
key_type 1, DescribeTransactions), describe-producers the partition's leader (DescribeProducers).
Output: Kafka's tab-separated columns.
"""
from __future__ import annotations

import asyncio
import sys

import kafka.errors as Errors
from kafka.protocol.admin import (DescribeProducersRequest, DescribeTransactionsRequest,
                                  ListTransactionsRequest)
from kafka.protocol.metadata import FindCoordinatorRequest

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.client.admin import Admin

TRANSACTION = 1


def add_transactions_parser(sub) -> None:
    t = add_admin_tool_parser(sub, "transactions", __doc__,
                              "list and describe transactions and producers", _main)
    cmd = t.add_subparsers(dest="txn_command", required=True, metavar="COMMAND")
    cmd.add_parser("list", help="every transactional id and its state")
    d = cmd.add_parser("describe", help="one transactional id's transaction")
    d.add_argument("--transactional-id", required=True)
    p = cmd.add_parser("describe-producers", help="the active producers of a partition")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", required=True, type=int)


def _print(rows: list[tuple], headers: tuple) -> None:
    print("\t".join(headers))
    for r in rows:
        print("\t".join(str(x) for x in r))


async def _main(admin: Admin, args) -> None:
    if args.txn_command == "list":
        await _list(admin)
    elif args.txn_command == "describe":
        await _describe(admin, args.transactional_id)
    else:
        await _describe_producers(admin, args.topic, args.partition)


async def _list(admin: Admin) -> None:
    await admin.metadata.fetch_all()
    rows = []
    for node in sorted(admin.metadata.brokers):
        resp = await admin.pool.request(node, ListTransactionsRequest(
            state_filters=[], producer_id_filters=[], duration_filter=-1), hi=1)
        if resp.error_code:
            sys.exit(f"Error: ListTransactions on broker {node}: "
                     f"{Errors.for_code(resp.error_code).__name__}")
        rows += [(s.transactional_id, node, s.producer_id, s.transaction_state)
                 for s in resp.transaction_states]
    _print(sorted(rows), ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"))


async def _coordinator(admin: Admin, tid: str) -> int:
    for _ in range(50):
        resp = await admin.pool.request(await _any(admin), FindCoordinatorRequest(
            key=tid, key_type=TRANSACTION), lo=1, hi=3)
        if resp.error_code == 0:
            admin.pool.update_addresses({resp.node_id: (resp.host, resp.port)})
            return resp.node_id
        if not Errors.for_code(resp.error_code).retriable:
            sys.exit(f"Error: FindCoordinator {tid}: {Errors.for_code(resp.error_code).__name__}")
        await asyncio.sleep(0.1)
    sys.exit(f"Error: no coordinator for transactional id {tid}")


async def _any(admin: Admin) -> int:
    node, _ = await admin.pool.any_connection()
    return node


async def _describe(admin: Admin, tid: str) -> None:
    node = await _coordinator(admin, tid)
    resp = await admin.pool.request(node, DescribeTransactionsRequest(transactional_ids=[tid]))
    [s] = resp.transaction_states
    if s.error_code:
        sys.exit(f"Error: transactional id {tid}: {Errors.for_code(s.error_code).__name__}")
    # The broker's clock is not ours: the duration is only shown relative to the start time.
    duration = "None"
    parts = ",".join(f"{t.topic}-{p}" for t in s.topics for p in t.partitions)
    _print([(node, tid, s.producer_id, s.producer_epoch, s.transaction_state,
             s.transaction_timeout_ms,
             s.transaction_start_time_ms if s.transaction_start_time_ms >= 0 else "None",
             duration, parts)],
           ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
            "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
            "TopicPartitions"))


async def _describe_producers(admin: Admin, topic: str, partition: int) -> None:
    await admin.metadata.fetch_all()
    leader = admin.metadata.leader(topic, partition)
    if leader < 0:
        sys.exit(f"Error: no leader for {topic}-{partition}")
    resp = await admin.pool.request(leader, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])]))
    [p] = resp.topics[0].partitions
    if p.error_code:
        sys.exit(f"Error: {topic}-{partition}: {Errors.for_code(p.error_code).__name__}")
    _print([(s.producer_id, s.producer_epoch, s.coordinator_epoch, s.last_sequence,
             s.last_timestamp, s.current_txn_start_offset if s.current_txn_start_offset >= 0
             else "None") for s in p.active_producers],
           ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
            "LastTimestamp", "CurrentTransactionStartOffset"))
