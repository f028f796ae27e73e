"""`minibroker consumer-groups --reset-offsets` and `--delete-offsets`: Kafka's reset plans and
their output (a NEW-OFFSET table, or --export's CSV), and OffsetDelete (KIP-496).

Targets: --to-earliest, --to-latest, --to-offset N, --shift-by N, --to-current, --to-datetime
YYYY-MM-DDTHH:mm:SS.sss[zone] (no zone: local time), --by-duration PnDTnHnMnS (now minus that),
--from-file CSV (topic,partition,offset, or group,topic,partition,offset). Offsets are kept
within the log, as Kafka's tool does.
"""
from __future__ import annotations

import datetime as dt
import re
import sys

from minibroker.cli.common import fail, os_reason
from minibroker.client.admin import Admin
from minibroker.client.records import TopicPartition
from minibroker.clock import Clock

INACTIVE = ("empty", "dead")
TARGETS = ("to_earliest", "to_latest", "to_offset", "shift_by", "to_current", "to_datetime",
           "by_duration", "from_file")


def target_given(args) -> bool:
    # `is`, not `in`: --to-offset 0 and --shift-by 0 are targets (0 == False)
    return any(getattr(args, t) is not None and getattr(args, t) is not False for t in TARGETS)


def parse_datetime(text: str) -> int:
    """Kafka's --to-datetime (yyyy-MM-dd'T'HH:mm:ss.SSS, optional zone) -> epoch ms."""
    t = text.strip()
    if t.endswith("Z"):
        t = t[:-1] + "+00:00"
    t = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", t)
    try:
        when = dt.datetime.fromisoformat(t)
    except ValueError:
        fail(f"Error parsing timestamp '{text}': expected yyyy-MM-ddTHH:mm:ss.SSS with an "
             "optional zone, e.g. 2024-01-31T12:00:00.000+01:00")
    return int(when.timestamp() * 1000)


def parse_duration(text: str) -> int:
    """ISO-8601 PnDTnHnMnS -> milliseconds."""
    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text.strip())
    if not m or text.strip() in ("P", "PT"):
        fail(f"Error parsing duration '{text}': expected ISO-8601 PnDTnHnMnS, e.g. PT1H30M")
    d, h, mi, s = (float(x) if x else 0.0 for x in m.groups())
    return int(((d * 24 + h) * 60 + mi) * 60_000 + s * 1000)


def read_plan(path: str, group: str) -> dict[TopicPartition, int]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
    except OSError as e:
        fail(f"cannot read --from-file {path}: {os_reason(e)}")
    plan = {}
    for n, line in enumerate(lines, 1):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == 4 and cells[0] != group:
            continue
        if len(cells) not in (3, 4) or not cells[-1].lstrip("-").isdigit() \
                or not cells[-2].isdigit():
            fail(f"{path} line {n}: expected topic,partition,offset (or group,topic,partition,"
                 f"offset), got '{line}'")
        plan[TopicPartition(cells[-3], int(cells[-2]))] = int(cells[-1])
    return plan


def wanted(args, committed: dict[TopicPartition, int], partitions: dict[str, int]
           ) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    if not args.topic:
        fail("--reset-offsets needs --topic, --all-topics or --from-file")
    out = []
    for spec in args.topic:
        topic, _, parts = spec.partition(":")
        if topic not in partitions:
            fail(f"topic '{topic}' does not exist")
        try:
            ids = [int(p) for p in parts.split(",")] if parts else range(partitions[topic])
        except ValueError:
            fail(f"--topic {spec}: partitions are numbers, e.g. {topic}:0,1")
        out += [TopicPartition(topic, p) for p in ids]
    return sorted(out)


async def _targets(admin: Admin, args, tps: list[TopicPartition],
                   committed: dict[TopicPartition, int], starts: dict, ends: dict) -> dict:
    if args.to_datetime or args.by_duration:
        ts = parse_datetime(args.to_datetime) if args.to_datetime else \
            Clock().now_ms() - parse_duration(args.by_duration)
        found = await admin.list_offsets({tp: ts for tp in tps})
        return {tp: found[tp][0] if found[tp][0] >= 0 else ends[tp] for tp in tps}
    out = {}
    for tp in tps:
        if args.to_earliest:
            out[tp] = starts[tp]
        elif args.to_latest:
            out[tp] = ends[tp]
        elif args.to_offset is not None:
            out[tp] = args.to_offset
        elif args.to_current:
            out[tp] = committed.get(tp, ends[tp])
        else:
            if tp not in committed:
                fail(f"Cannot shift offset for partition {tp.topic}-{tp.partition} since there "
                     "is no current committed offset")
            out[tp] = committed[tp] + args.shift_by
    return out


async def plan_reset(admin: Admin, args, group: str, state: str) -> dict[TopicPartition, int]:
    if args.execute and state.lower() not in INACTIVE:
        fail(f"Assignments can only be reset if the group '{group}' is inactive, but the "
             f"current state is {state}.")
    committed = await admin.list_group_offsets(group)
    if args.from_file:
        given = read_plan(args.from_file, group)
        tps = sorted(given)
    else:
        tps = wanted(args, committed, await admin.list_topics())
    if not tps:
        fail(f"group '{group}' has no committed offsets to reset")
    starts = {tp: o for tp, (o, _) in (await admin.list_offsets(
        {tp: "earliest" for tp in tps})).items()}
    ends = {tp: o for tp, (o, _) in (await admin.list_offsets(
        {tp: "latest" for tp in tps})).items()}
    targets = given if args.from_file else await _targets(admin, args, tps, committed, starts,
                                                         ends)
    return {tp: min(max(off, starts[tp]), ends[tp]) for tp, off in targets.items()}


def print_plans(plans: dict[str, dict[TopicPartition, int]], export: bool, table) -> None:
    if export:
        several = len(plans) > 1
        for group, plan in plans.items():
            for tp, off in sorted(plan.items()):
                print(f"{group + ',' if several else ''}{tp.topic},{tp.partition},{off}")
        return
    for group, plan in plans.items():
        print(table([(group, tp.topic, tp.partition, off) for tp, off in sorted(plan.items())],
                    ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"), [None, None, 10, None]))


async def delete_offsets(admin: Admin, group: str, topics: list[str]) -> None:
    partitions = await admin.list_topics()
    tps = []
    for spec in topics:
        topic, _, parts = spec.partition(":")
        ids = [int(p) for p in parts.split(",")] if parts else \
            range(partitions.get(topic, 0)) or [-1]
        tps += [TopicPartition(topic, p) for p in ids]
    top, results = await admin.delete_group_offsets(group, [tp for tp in tps if tp.partition >= 0])
    name = type(top).__name__ if top is not None else ""
    if top is None:
        print(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group}")
    elif name == "GroupIdNotFoundError":
        print(f"\nError: '{group}' does not exist.")
    elif name == "NonEmptyGroupError":
        print(f"\nError: Deleting offsets of a consumer group '{group}' is forbidden if the "
              "group is not empty.")
    else:
        print("\nError: Encounter some partition level error, see the follow-up details:")
    print(f"\n{'TOPIC':<30} {'PARTITION':<15} {'STATUS':<15}", end="")
    for tp in sorted(results, key=lambda tp: tp.topic + str(tp.partition)):
        err = results[tp]
        status = "Successful" if err is None else f"Error: :{getattr(type(err), 'description', err)}"
        print(f"\n{tp.topic:<30} {tp.partition:<15} {status:<15}", end="")
    print()
    if top is not None:
        sys.exit(1)
