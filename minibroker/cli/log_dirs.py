"""`minibroker log-dirs` — kafka-log-dirs.sh (DescribeLogDirs, key 35), Kafka's JSON output.

    minibroker log-dirs --bootstrap-server 127.0.0.1:9092 --describe [--broker-list 1,2] \\
        [--topic-list t1,t2]

Each broker has one log directory here ("/minibroker/data", or its --data-dir); sizes are the
bytes each partition's log holds.
"""
from __future__ import annotations

import json

from kafka.protocol.admin import DescribeLogDirsRequest

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import fail
from minibroker.client.admin import Admin


def add_log_dirs_parser(sub) -> None:
    p = add_admin_tool_parser(sub, "log-dirs", __doc__,
                              "each broker's log directories and partition sizes", _main)
    p.add_argument("--describe", action="store_true", required=True,
                   help="describe the log directories (the only action)")
    p.add_argument("--broker-list", metavar="IDS", help="these brokers (default: all)")
    p.add_argument("--topic-list", metavar="TOPICS", help="only these topics (default: all)")


def _ids(text: str) -> list[int]:
    try:
        return sorted({int(b) for b in text.split(",") if b.strip()})
    except ValueError:
        fail(f"--broker-list expects broker ids like 1,2,3, got '{text}'")


async def _main(admin: Admin, args) -> None:
    await admin.metadata.fetch_all()
    cluster = sorted(admin.metadata.brokers)
    wanted = _ids(args.broker_list) if args.broker_list else cluster
    missing = [b for b in wanted if b not in cluster]
    if missing:
        fail(f"ERROR: The given brokers do not exist from --broker-list: "
             f"{','.join(map(str, missing))}. Current existent brokers: "
             f"{','.join(map(str, cluster))}")
    topics = {t.strip() for t in args.topic_list.split(",")} if args.topic_list else None
    print("Querying brokers for log directories information")
    brokers = []
    for b in wanted:
        resp = await admin.pool.request(b, DescribeLogDirsRequest(topics=None))
        dirs = []
        for d in resp.results:
            parts = [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
                      "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                     for t in d.topics if topics is None or t.name in topics
                     for p in t.partitions]
            dirs.append({"partitions": sorted(parts, key=lambda x: x["partition"]),
                         "error": None if not d.error_code else f"error {d.error_code}",
                         "logDir": d.log_dir})
        brokers.append({"broker": b, "logDirs": dirs})
    print(f"Received log directory information from brokers {','.join(map(str, wanted))}")
    print(json.dumps({"brokers": brokers, "version": 1}, separators=(",", ":")))
