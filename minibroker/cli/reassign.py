"""`minibroker reassign-partitions` — kafka-reassign-partitions.sh over --bootstrap-server, with
the KIP-179 draft's request ids and progress:

    minibroker reassign-partitions --bootstrap-server 127.0.0.1:9092 --execute \\
        --reassignment-json-file move.json          # prints the request id, returns at once
    minibroker reassign-partitions --bootstrap-server ... --progress [--request 42]
    minibroker reassign-partitions --bootstrap-server ... --verify --reassignment-json-file move.json
    minibroker reassign-partitions --bootstrap-server ... --execute --throttle 1000000 \
        --reassignment-json-file move.json          # the moving replicas get 1 MB/s
    minibroker reassign-partitions --bootstrap-server ... --cancel --reassignment-json-file move.json

The file is Kafka's: {"version": 1, "partitions": [{"topic": "t", "partition": 0,
"replicas": [1, 2, 3]}, ...]}. --progress without --request reports the most recent request.
--throttle and --cancel work as Kafka's (minibroker.cli.reassign_throttle): --verify clears the
throttle once every move completed, --cancel keeps the old replicas and clears it too.
"""
from __future__ import annotations

import sys

from minibroker.cli import reassign_throttle as throttle
from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import add_switches, read_json_file, refuse, refuse_bootstrap_controller
from minibroker.cli.reassign_plan import generate, list_moves
from minibroker.client.admin import Admin
from minibroker.client.records import TopicPartition


def add_reassign_parser(sub) -> None:
    r = add_admin_tool_parser(sub, "reassign-partitions", __doc__,
                              "move partitions between brokers (KIP-179) and follow the progress",
                              _reassign, client_id="minibroker-reassign")
    g = r.add_mutually_exclusive_group(required=True)
    add_switches(g, ("--generate", "propose moving --topics-to-move-json-file's topics to "
                                   "--broker-list"),
                 ("--list", "the reassignments in progress"),
                 ("--execute", "start the moves in --reassignment-json-file"),
                 ("--progress", "each new replica's share of the leader's log"),
                 ("--verify", "whether the file's moves are complete (then clears the throttle)"),
                 ("--cancel", "cancel the file's moves: the old replicas stay"))
    r.add_argument("--reassignment-json-file", metavar="FILE",
                   help="Kafka's reassignment JSON (--execute, --verify)")
    r.add_argument("--request", type=int, default=-1, help="request id (-1: the latest)")
    r.add_argument("--throttle", type=int, default=-1, metavar="BYTES/S",
                   help="--execute: replication rate of the moving replicas (-1: no limit)")
    add_switches(r, ("--preserve-throttles", "--cancel: leave the throttle configs in place"))
    r.add_argument("--topics-to-move-json-file", metavar="FILE",
                   help="--generate: {\"version\": 1, \"topics\": [{\"topic\": ...}]}")
    r.add_argument("--broker-list", metavar="IDS", help="--generate: brokers to move onto")
    add_switches(r, ("--disable-rack-aware", "--generate: ignore the brokers' racks"),
                 ("--additional",
                  "--execute: accepted; moves may always be added (KIP-179 request ids)"))
    r.add_argument("--timeout", type=int, default=10000, metavar="MS",
                   help="--execute: accepted for scripts (moves start at once here)")
    refuse(r, "--replica-alter-log-dirs-throttle", "minibroker's brokers have one log "
           "directory each: there are no moves between directories to throttle")
    refuse_bootstrap_controller(r)


def _targets(path: str | None) -> dict[TopicPartition, list[int]]:
    if not path:
        sys.exit("--reassignment-json-file is required")
    return read_json_file(
        path, 'a reassignment ({"version": 1, "partitions": [{"topic": ..., "partition": N, '
        '"replicas": [...]}]})',
        lambda doc: {TopicPartition(p["topic"], int(p["partition"])): [int(b) for b in p["replicas"]]
                     for p in doc["partitions"]})


async def _reassign(admin: Admin, args) -> None:
    if args.generate:
        await generate(admin, args)
    elif args.list:
        await list_moves(admin)
    elif args.execute:
        await _execute(admin, _targets(args.reassignment_json_file), args.throttle)
    elif args.progress:
        await _progress(admin, args.request)
    elif args.cancel:
        await throttle.cancel(admin, _targets(args.reassignment_json_file),
                              args.preserve_throttles)
    else:
        await _verify(admin, _targets(args.reassignment_json_file))


async def _execute(admin: Admin, targets: dict[TopicPartition, list[int]],
                   rate: int = -1) -> None:
    if rate >= 0:
        print("Warning: You must run --verify periodically, until the reassignment completes, "
              "to ensure the throttle is removed.")
        await throttle.set_throttles(admin, targets,
                                     await throttle.current_replicas(admin, targets), rate)
    request_id, results = await admin.assign_partitions(targets, raise_on_error=False)
    failed = [(tp, b, e) for (tp, b), e in results.items() if e is not None]
    for tp, b, e in failed:
        print(f"Error: {tp.topic}-{tp.partition} to broker {b}: {type(e).__name__}",
              file=sys.stderr)
    if request_id < 0:
        sys.exit("No reassignment started.")
    print(f"Successfully started partition reassignment, request id {request_id}.")
    print(request_id)
    if failed:
        sys.exit(1)


async def _progress(admin: Admin, request_id: int) -> None:
    from kafka.errors import KafkaError, NoReassignmentInProgressError

    from minibroker.protocol.errors import PARTITION_REASSIGNMENT_IN_PROGRESS, for_code
    try:
        request_id, replicas = await admin.partition_assignment_status(request_id)
    except KafkaError as e:
        sys.exit(f"Error: {type(e).__name__}: no reassignment request {request_id}")
    NO_REASSIGNMENT_IN_PROGRESS = NoReassignmentInProgressError.errno      # cancelled (KIP-455)
    running = False
    print(f"Reassignment request {request_id}:")
    for (tp, broker), (code, num, den) in sorted(
            replicas.items(), key=lambda kv: (kv[0][0].topic, kv[0][0].partition, kv[0][1])):
        where = f"{tp.topic}-{tp.partition} to broker {broker}"
        if code == 0:
            print(f"  {where}: complete")
        elif code == PARTITION_REASSIGNMENT_IN_PROGRESS:
            running = True
            share = f", {num}/{den} ({100 * num // den}%)" if den > 0 else ""
            print(f"  {where}: in progress{share}")
        elif code == NO_REASSIGNMENT_IN_PROGRESS:
            print(f"  {where}: cancelled")
        else:
            print(f"  {where}: failed: {for_code(code).__name__}")
    print(f"Reassignment request {request_id} is {'still in progress' if running else 'complete'}.")


async def _verify(admin: Admin, targets: dict[TopicPartition, list[int]]) -> None:
    done = True
    for topic in sorted({tp.topic for tp in targets}):
        await admin.metadata.refresh([topic])
    for tp, want in sorted(targets.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        md = admin.metadata.topic(tp.topic)
        p = md.partitions.get(tp.partition) if md is not None else None
        state = "completed" if p is not None and list(p.replicas) == want else "still in progress"
        done &= state == "completed"
        print(f"Reassignment of partition {tp.topic}-{tp.partition} is {state}.")
    topics = {tp.topic for tp in targets}
    if done and await throttle.throttled(admin, topics):
        await throttle.clear_throttles(admin, topics)
