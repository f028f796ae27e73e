"""`minibroker get-offsets` and `minibroker delete-records` — kafka-get-offsets.sh
(GetOffsetShell) and kafka-delete-records.sh, with their output.

    minibroker get-offsets --bootstrap-server 127.0.0.1:9092 --topic 'orders.*' --time earliest
    minibroker get-offsets --bootstrap-server ... --topic-partitions 'orders:0-2,audit'
    minibroker delete-records --bootstrap-server ... --offset-json-file purge.json

get-offsets prints `topic:partition:offset` per partition; --time is a timestamp (ms) or -1 /
latest, -2 / earliest, -3 / max-timestamp, -4 / earliest-local, -5 / latest-tiered (here the
log is all local: -4 is earliest, -5 has no tiered offset). delete-records reads Kafka's
{"version": 1, "partitions": [{"topic": "t", "partition": 0, "offset": 10}]} (offset -1: the
high watermark).
"""
from __future__ import annotations

import re

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import fail, read_json_file
from minibroker.cli.topics_describe import matching_topics
from minibroker.client.admin import Admin
from minibroker.client.records import TopicPartition

_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3, "earliest-local": -4,
          "latest-tiered": -5}


def add_offsets_tools_parsers(sub) -> None:
    g = add_admin_tool_parser(sub, "get-offsets", __doc__,
                              "offsets of topic-partitions at a time (GetOffsetShell)",
                              _get_offsets)
    g.add_argument("--topic-partitions", metavar="T[:P|P-Q|P-|-Q],...",
                   help="topics (regular expressions) and partition ranges")
    g.add_argument("--topic", help="a topic regular expression (default: every topic)")
    g.add_argument("--partitions", metavar="P,P,...", help="with --topic: these partitions")
    g.add_argument("--time", default="latest", help="timestamp in ms, or -1/latest, "
                   "-2/earliest, -3/max-timestamp, -4/earliest-local, -5/latest-tiered")
    g.add_argument("--exclude-internal-topics", action="store_true",
                   help="leave out internal topics")
    d = add_admin_tool_parser(sub, "delete-records", __doc__,
                              "move log start offsets forward (DeleteRecords)", _delete_records)
    d.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help="Kafka's {\"partitions\": [{\"topic\", \"partition\", \"offset\"}]}")


def _time(text: str) -> int:
    if text in _TIMES:
        return _TIMES[text]
    try:
        return int(text)
    except ValueError:
        fail(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
             "max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long "
             "format timestamp")


def _ranges(spec: str) -> tuple[str, int, int | None]:
    """"t:0-2" -> ("t", 0, 3); "t" -> ("t", 0, None); "t:-3" -> ("t", 0, 3); "t:4-" -> (t, 4, None)."""
    topic, sep, parts = spec.partition(":")
    if not sep or not parts:
        return topic, 0, None
    m = re.fullmatch(r"(\d*)(-?)(\d*)", parts)
    if not m or not (m.group(1) or m.group(3)):
        fail(f"Invalid partition range '{parts}' in --topic-partitions '{spec}'")
    lo = int(m.group(1)) if m.group(1) else 0
    if not m.group(2):
        return topic, lo, lo + 1
    return topic, lo, int(m.group(3)) + 1 if m.group(3) else None


async def _get_offsets(admin: Admin, args) -> None:
    if args.topic_partitions and (args.topic or args.partitions):
        fail("--topic-partitions cannot be used with --topic or --partitions")
    when = _time(args.time)
    if args.topic_partitions:
        specs = [_ranges(s.strip()) for s in args.topic_partitions.split(",") if s.strip()]
    else:
        specs = [(args.topic or ".*", 0, None)]
    wanted_parts = None
    if args.partitions:
        try:
            wanted_parts = {int(p) for p in args.partitions.split(",")}
        except ValueError:
            fail(f"--partitions expects numbers like 0,1,2, got '{args.partitions}'")
    counts = {t: md.partition_count for t, md in (await admin.describe_topics(
        await matching_topics(admin, None, args.exclude_internal_topics))).items() if md}
    tps = set()
    for pattern, lo, hi in specs:
        try:
            rx = re.compile(pattern)
        except re.error as e:
            fail(f"'{pattern}' is not a regular expression: {e}")
        for topic, n in counts.items():
            if rx.fullmatch(topic):
                tps |= {TopicPartition(topic, p) for p in range(lo, n if hi is None else min(hi, n))
                        if wanted_parts is None or p in wanted_parts}
    if when == -5:
        return                                  # nothing is tiered here
    found = await admin.list_offsets({tp: -2 if when == -4 else when for tp in tps}) if tps else {}
    for tp in sorted(found, key=lambda tp: (tp.topic, tp.partition)):
        offset, _ = found[tp]
        if offset >= 0:
            print(f"{tp.topic}:{tp.partition}:{offset}")


async def _delete_records(admin: Admin, args) -> None:
    path = args.offset_json_file
    before = read_json_file(
        path, 'an offset file ({"partitions": [{"topic": ..., "partition": N, "offset": N}]})',
        lambda doc: [(TopicPartition(p["topic"], int(p["partition"])), int(p.get("offset", -1)))
                     for p in doc["partitions"]])
    dup = sorted({f"{tp.topic}-{tp.partition}" for tp, _ in before
                  if sum(1 for t, _ in before if t == tp) > 1})
    if dup:
        fail(f"Offset json file contains duplicate topic partitions: {', '.join(dup)}")
    print("Executing records delete operation")
    results = await admin.delete_records(dict(before), raise_on_error=False)
    print("Records delete operation completed:")
    for tp, res in sorted(results.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        if isinstance(res, Exception):
            print(f"partition: {tp.topic}-{tp.partition}\terror: {res}")
        else:
            print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {res}")
