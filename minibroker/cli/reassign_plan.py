"""`minibroker reassign-partitions --generate` and `--list`, as Kafka's tool prints them.

--generate reads --topics-to-move-json-file ({"version": 1, "topics": [{"topic": "t"}]}) and
--broker-list "1,2,3", and prints the current assignment and a proposed one (Kafka's
rack-aware round-robin placement over those brokers, or rack-unaware with --disable-rack-aware),
both in the --reassignment-json-file format. --list prints the reassignments in progress
(ListPartitionReassignments).
"""
from __future__ import annotations

import json
import random
from typing import NamedTuple

from kafka.protocol.admin import ListPartitionReassignmentsRequest

from minibroker.cli.common import fail, os_reason
from minibroker.client.admin import Admin
from minibroker.controller.placement import assign_replicas


class _Broker(NamedTuple):
    broker_id: int
    rack: str | None


def _topics_to_move(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return [t["topic"] for t in doc["topics"]]
    except OSError as e:
        fail(f"cannot read {path}: {os_reason(e)}")
    except json.JSONDecodeError as e:
        fail(f"{path} is not JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except (KeyError, TypeError) as e:
        fail(f"{path} is not a topics-to-move file ({{\"version\": 1, \"topics\": "
             f"[{{\"topic\": ...}}]}}): {e.args[0] if e.args else e}")


def _plan_json(plan: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(plan.items())]}, separators=(",", ":"))


async def generate(admin: Admin, args) -> None:
    if not args.topics_to_move_json_file or not args.broker_list:
        fail("--generate needs --topics-to-move-json-file and --broker-list")
    try:
        wanted = sorted({int(b) for b in args.broker_list.split(",")})
    except ValueError:
        fail(f"--broker-list expects broker ids like 1,2,3, got '{args.broker_list}'")
    topics = _topics_to_move(args.topics_to_move_json_file)
    await admin.metadata.fetch_all()
    brokers = admin.metadata.brokers
    unknown = [b for b in wanted if b not in brokers]
    if unknown:
        fail(f"Unknown broker id(s) in --broker-list: {', '.join(map(str, unknown))}")
    racks = [_Broker(b, None if args.disable_rack_aware else brokers[b].rack) for b in wanted]
    current, proposed = {}, {}
    rng = random.Random()
    for topic in topics:
        md = admin.metadata.topic(topic)
        if md is None or md.error_code:
            fail(f"Topic {topic} not found")
        for p, pm in md.partitions.items():
            current[(topic, p)] = list(pm.replicas)
        rf = len(next(iter(md.partitions.values())).replicas)
        if rf > len(wanted):
            fail(f"Replication factor: {rf} larger than available brokers: {len(wanted)}.")
        for p, replicas in assign_replicas(racks, 0, len(md.partitions), rf, rng).items():
            proposed[(topic, p)] = list(replicas)
    print("Current partition replica assignment")
    print(_plan_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(_plan_json(proposed))


async def list_moves(admin: Admin) -> None:
    resp = await admin._to_controller(ListPartitionReassignmentsRequest(
        timeout_ms=admin.timeout_ms, topics=None))
    if resp.error_code:
        fail(f"ListPartitionReassignments: {resp.error_message or resp.error_code}")
    moves = sorted((t.name, p.partition_index, p) for t in resp.topics for p in t.partitions)
    if not moves:
        print("No partition reassignments found.")
        return
    print("Current partition reassignments:")
    for topic, partition, p in moves:
        print(f"{topic}-{partition}: replicas: {','.join(map(str, p.replicas))}. "
              f"adding: {','.join(map(str, p.adding_replicas))}. "
              f"removing: {','.join(map(str, p.removing_replicas))}.")
