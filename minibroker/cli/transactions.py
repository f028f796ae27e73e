"""`minibroker transactions` — kafka-transactions.sh: list, describe, describe-producers,
find-hanging and abort, with Kafka's columns.

    minibroker transactions --bootstrap-server 127.0.0.1:9092 list [--duration-filter MS]
    minibroker transactions --bootstrap-server ... describe --transactional-id T
    minibroker transactions --bootstrap-server ... describe-producers --topic T --partition P
    minibroker transactions --bootstrap-server ... find-hanging --broker-id 1 | --topic T \\
        [--partition P] [--max-transaction-timeout MINUTES]
    minibroker transactions --bootstrap-server ... abort --topic T --partition P \\
        --start-offset N      (or --producer-id --producer-epoch --coordinator-epoch)

list asks every broker (ListTransactions), describe the id's coordinator (FindCoordinator
key_type 1, DescribeTransactions), describe-producers and find-hanging the partition leaders
(DescribeProducers); abort writes an ABORT marker at the partition's leader (WriteTxnMarkers), as
Kafka's Admin.abortTransaction does. A hanging transaction is open on a partition longer than
--max-transaction-timeout while its coordinator does not count that partition in it.
"""
from __future__ import annotations

import asyncio

import kafka.errors as Errors
from kafka.protocol.admin import (DescribeProducersRequest, DescribeTransactionsRequest,
                                  ListTransactionsRequest)
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import WriteTxnMarkersRequest

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import fail
from minibroker.client.admin import Admin
from minibroker.clock import Clock

TRANSACTION = 1
_Marker = WriteTxnMarkersRequest.WritableTxnMarker


def add_transactions_parser(sub) -> None:
    t = add_admin_tool_parser(sub, "transactions", __doc__,
                              "list, describe, find hanging and abort transactions", _main)
    cmd = t.add_subparsers(dest="txn_command", required=True, metavar="COMMAND")
    ls = cmd.add_parser("list", help="every transactional id and its state")
    ls.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                    help="only transactions running at least this long")
    d = cmd.add_parser("describe", help="one transactional id's transaction")
    d.add_argument("--transactional-id", required=True)
    p = cmd.add_parser("describe-producers", help="the active producers of a partition")
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", required=True, type=int)
    p.add_argument("--broker-id", type=int, help="ask this replica instead of the leader")
    h = cmd.add_parser("find-hanging", help="open transactions their coordinator forgot")
    h.add_argument("--broker-id", type=int, help="search the partitions this broker leads")
    h.add_argument("--topic", help="search this topic's partitions")
    h.add_argument("--partition", type=int, help="with --topic: only this partition")
    h.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="open longer than this = a candidate (transaction.max.timeout.ms)")
    a = cmd.add_parser("abort", help="abort a hanging transaction with an ABORT marker")
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", required=True, type=int)
    a.add_argument("--start-offset", type=int, help="the open transaction's first offset")
    a.add_argument("--producer-id", type=int)
    a.add_argument("--producer-epoch", type=int)
    a.add_argument("--coordinator-epoch", type=int)


def print_table(headers: tuple, rows: list[tuple]) -> None:
    """Kafka's ToolsUtils.prettyPrintTable: each cell padded to its column's width, then a tab."""
    cells = [[str(x) for x in r] for r in [headers, *rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    for r in cells:
        print("".join(f"{v:<{widths[i]}}\t" for i, v in enumerate(r)))


async def _main(admin: Admin, args) -> None:
    command = args.txn_command
    if command == "list":
        await _list(admin, args.duration_filter)
    elif command == "describe":
        await _describe(admin, args.transactional_id)
    elif command == "describe-producers":
        await _describe_producers(admin, args.topic, args.partition, args.broker_id)
    elif command == "find-hanging":
        await _find_hanging(admin, args)
    else:
        await _abort(admin, args)


async def _list_states(admin: Admin, producer_ids: list[int] | None = None,
                       duration_ms: int = -1) -> list[tuple]:
    await admin.metadata.fetch_all()
    rows = []
    for node in sorted(admin.metadata.brokers):
        resp = await admin.pool.request(node, ListTransactionsRequest(
            state_filters=[], producer_id_filters=producer_ids or [],
            duration_filter=duration_ms), hi=1)
        if resp.error_code:
            fail(f"ListTransactions on broker {node}: "
                 f"{Errors.for_code(resp.error_code).__name__}")
        rows += [(s.transactional_id, node, s.producer_id, s.transaction_state)
                 for s in resp.transaction_states]
    return sorted(rows)


async def _list(admin: Admin, duration_ms: int) -> None:
    print_table(("TransactionalId", "Coordinator", "ProducerId", "TransactionState"),
                await _list_states(admin, duration_ms=duration_ms))


async def _coordinator(admin: Admin, tid: str) -> int:
    for _ in range(50):
        node, _ = await admin.pool.any_connection()
        resp = await admin.pool.request(node, FindCoordinatorRequest(
            key=tid, key_type=TRANSACTION), lo=1, hi=3)
        if resp.error_code == 0:
            admin.pool.update_addresses({resp.node_id: (resp.host, resp.port)})
            return resp.node_id
        if not Errors.for_code(resp.error_code).retriable:
            fail(f"FindCoordinator {tid}: {Errors.for_code(resp.error_code).__name__}")
        await asyncio.sleep(0.1)
    fail(f"no coordinator for transactional id {tid}")


async def _describe_states(admin: Admin, tids: list[str]) -> dict[str, object]:
    out = {}
    for tid in tids:
        node = await _coordinator(admin, tid)
        resp = await admin.pool.request(node, DescribeTransactionsRequest(transactional_ids=[tid]))
        out[tid] = (node, resp.transaction_states[0])
    return out


async def _describe(admin: Admin, tid: str) -> None:
    node, s = (await _describe_states(admin, [tid]))[tid]
    if s.error_code:
        fail(f"Failed to describe transaction {tid}: "
             f"{Errors.for_code(s.error_code).__name__}")
    start = s.transaction_start_time_ms
    started = start >= 0
    parts = ",".join(f"{t.topic}-{p}" for t in s.topics for p in t.partitions)
    print_table(("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch",
                 "TransactionState", "TransactionTimeoutMs", "CurrentTransactionStartTimeMs",
                 "TransactionDurationMs", "TopicPartitions"),
                [(node, tid, s.producer_id, s.producer_epoch, s.transaction_state,
                  s.transaction_timeout_ms, start if started else "None",
                  max(0, Clock().now_ms() - start) if started else "None", parts)])


async def _producers(admin: Admin, topic: str, partition: int, broker: int | None) -> list:
    if not admin.metadata.topics.get(topic):
        await admin.metadata.refresh([topic])
    node = broker if broker is not None else admin.metadata.leader(topic, partition)
    if node < 0:
        fail(f"no leader for {topic}-{partition}")
    resp = await admin.pool.request(node, DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])]))
    [p] = resp.topics[0].partitions
    if p.error_code:
        fail(f"Failed to describe producers for partition {topic}-{partition}: "
             f"{Errors.for_code(p.error_code).__name__}")
    return list(p.active_producers)


async def _describe_producers(admin: Admin, topic: str, partition: int,
                              broker: int | None) -> None:
    rows = [(s.producer_id, s.producer_epoch, s.coordinator_epoch, s.last_sequence,
             s.last_timestamp, s.current_txn_start_offset if s.current_txn_start_offset >= 0
             else "None") for s in await _producers(admin, topic, partition, broker)]
    print_table(("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                 "LastTimestamp", "CurrentTransactionStartOffset"), rows)


async def _find_hanging(admin: Admin, args) -> None:
    if args.topic is None and args.broker_id is None:
        fail("The `find-hanging` command requires either --topic or --broker-id to limit the "
             "scope of the search")
    if args.partition is not None and args.topic is None:
        fail("The --partition argument requires --topic to be provided")
    await admin.metadata.fetch_all()
    topics = [args.topic] if args.topic else sorted(admin.metadata.topics)
    now, limit = Clock().now_ms(), args.max_transaction_timeout * 60_000
    candidates = []
    for topic in topics:
        md = admin.metadata.topics.get(topic)
        if md is None or md.error_code:
            fail(f"Topic '{topic}' does not exist")
        for p in sorted(md.partitions):
            if args.partition is not None and p != args.partition:
                continue
            if args.broker_id is not None and md.partitions[p].leader != args.broker_id:
                continue
            candidates += [(topic, p, s) for s in await _producers(admin, topic, p, None)
                           if s.current_txn_start_offset >= 0 and now - s.last_timestamp >= limit]
    ids = {pid: tid for tid, _, pid, _ in await _list_states(
        admin, sorted({s.producer_id for _, _, s in candidates}))} if candidates else {}
    described = await _describe_states(admin, sorted(set(ids.values())))
    hanging = []
    for topic, p, s in candidates:
        tid = ids.get(s.producer_id)
        state = described.get(tid, (None, None))[1] if tid else None
        open_parts = set() if state is None or state.error_code else \
            {(t.topic, q) for t in state.topics for q in t.partitions}
        if (topic, p) not in open_parts:
            hanging.append((topic, p, s.producer_id, s.producer_epoch, s.coordinator_epoch,
                            s.current_txn_start_offset, s.last_timestamp,
                            (now - s.last_timestamp) // 60_000))
    print_table(("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                 "StartOffset", "LastTimestamp", "Duration(min)"), hanging)


async def _abort(admin: Admin, args) -> None:
    topic, partition = args.topic, args.partition
    if args.start_offset is None and args.producer_id is None:
        fail("The transaction to abort must be identified either with --start-offset (for "
             "brokers on 3.0 or above) or with --producer-id, --producer-epoch, and "
             "--coordinator-epoch (for older brokers)")
    if args.start_offset is not None:
        found = [s for s in await _producers(admin, topic, partition, None)
                 if s.current_txn_start_offset == args.start_offset]
        if not found:
            fail(f"Could not find any open transactions starting at offset {args.start_offset} "
                 f"on partition {topic}-{partition}")
        pid, epoch, coord = found[0].producer_id, found[0].producer_epoch, \
            found[0].coordinator_epoch
    else:
        for flag in ("producer_epoch", "coordinator_epoch"):
            if getattr(args, flag) is None:
                fail(f"Missing required argument --{flag.replace('_', '-')}")
        pid, epoch, coord = args.producer_id, args.producer_epoch, args.coordinator_epoch
    leader = admin.metadata.leader(topic, partition)
    resp = await admin.pool.request(leader, WriteTxnMarkersRequest(markers=[_Marker(
        producer_id=pid, producer_epoch=epoch, transaction_result=False,
        coordinator_epoch=max(coord, 0), transaction_version=0,
        topics=[_Marker.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])]),
        lo=1, hi=1)
    code = resp.markers[0].topics[0].partitions[0].error_code
    if code:
        fail(f"Failed to abort transaction of producer {pid} on {topic}-{partition}: "
             f"{Errors.for_code(code).__name__}")
