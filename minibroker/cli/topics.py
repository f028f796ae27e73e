"""`minibroker topics` — kafka-topics.sh's flags, talking to any broker over the wire.

    minibroker topics --bootstrap-server 127.0.0.1:9092 --create --topic t --partitions 3 \
        --replication-factor 3 --config retention.ms=60000
    minibroker topics --bootstrap-server ... --alter --topic t --partitions 6   (or fewer: KIP-253)
    minibroker topics --bootstrap-server ... --list | --describe [--topic t] | --delete --topic t
"""
from __future__ import annotations

import asyncio

from kafka.errors import UnknownTopicOrPartitionError, for_code
from kafka.protocol.admin import (CreatePartitionsRequest, CreateTopicsRequest,
                                  DeleteTopicsRequest)
from kafka.protocol.metadata import MetadataRequest

from minibroker.cli.common import bootstrap_servers, connect_any, fail


def add_topics_parser(sub) -> None:
    t = sub.add_parser("topics", help="create, alter, delete, list, describe topics",
                       description=__doc__)
    t.add_argument("--bootstrap-server", required=True, type=bootstrap_servers,
                   metavar="HOST:PORT[,HOST:PORT...]",
                   help="brokers to talk to, each tried in turn until one answers")
    g = t.add_mutually_exclusive_group(required=True)
    for action, what in (("create", "create --topic"), ("alter", "change --topic's partition "
                         "count (fewer: KIP-253)"), ("delete", "delete --topic"),
                         ("list", "list topic names"), ("describe", "describe all or --topic")):
        g.add_argument(f"--{action}", action="store_true", help=what)
    t.add_argument("--topic", help="topic name")
    t.add_argument("--partitions", type=int, default=-1,
                   help="partition count (-1 = the broker's num.partitions)")
    t.add_argument("--replication-factor", type=int, default=-1,
                   help="replicas per partition (-1 = default.replication.factor)")
    t.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="a topic config, e.g. retention.ms=60000 (repeat)")
    t.add_argument("--timeout-ms", type=int, default=30000, help="request timeout")
    t.set_defaults(func=lambda args: asyncio.run(_topics(args)))


def _check(code: int, message: str | None, topic: str) -> None:
    if code == UnknownTopicOrPartitionError.errno:
        fail(f"Topic '{topic}' does not exist")
    if code:
        fail(f"Error while executing topic command on '{topic}': {for_code(code).__name__}: "
             f"{message or 'no details'}")


async def _topics(args) -> None:
    conn = await connect_any(args.bootstrap_server, "minibroker-topics")
    try:
        await _run(conn, args)
    finally:
        conn.close()


async def _run(conn, args) -> None:
    timeout = args.timeout_ms
    if (args.create or args.alter or args.delete) and not args.topic:
        fail("--create, --alter and --delete need --topic")
    if args.create:
        T = CreateTopicsRequest.CreatableTopic
        cfgs = [T.CreatableTopicConfig(name=k, value=v)
                for k, _, v in (c.partition("=") for c in args.config)]
        resp = await conn.request(CreateTopicsRequest(topics=[T(
            name=args.topic, num_partitions=args.partitions,
            replication_factor=args.replication_factor, assignments=[], configs=cfgs)],
            timeout_ms=timeout, validate_only=False), 5)
        r = resp.topics[0]
        _check(r.error_code, r.error_message, args.topic)
        print(f"Created topic {args.topic}.")
    elif args.alter:
        if args.partitions < 0:
            fail("--alter needs --partitions")
        P = CreatePartitionsRequest.CreatePartitionsTopic
        resp = await conn.request(CreatePartitionsRequest(topics=[P(
            name=args.topic, count=args.partitions, assignments=None)], timeout_ms=timeout,
            validate_only=False), 3)
        r = resp.results[0]
        _check(r.error_code, r.error_message, args.topic)
        print(f"Altered partition count of {args.topic} to {args.partitions}.")
    elif args.delete:
        resp = await conn.request(DeleteTopicsRequest(topic_names=[args.topic], topics=[],
                                                      timeout_ms=timeout), 4)
        r = resp.responses[0]
        _check(r.error_code, getattr(r, "error_message", None), args.topic)
        print(f"Deleted topic {args.topic}.")
    else:
        topics = None if not args.topic else [MetadataRequest.MetadataRequestTopic(
            name=args.topic)]
        md = await conn.request(MetadataRequest(topics=topics, allow_auto_topic_creation=False), 12)
        for t in sorted(md.topics, key=lambda t: t.name):
            _check(t.error_code, None, t.name)
            if args.list:
                print(t.name)
                continue
            rf = len(t.partitions[0].replica_nodes) if t.partitions else 0
            print(f"Topic: {t.name}\tTopicId: {t.topic_id}\tPartitionCount: {len(t.partitions)}"
                  f"\tReplicationFactor: {rf}")
            for p in sorted(t.partitions, key=lambda p: p.partition_index):
                print(f"\tTopic: {t.name}\tPartition: {p.partition_index}\tLeader: {p.leader_id}"
                      f"\tReplicas: {','.join(map(str, p.replica_nodes))}"
                      f"\tIsr: {','.join(map(str, p.isr_nodes))}")
