"""`minibroker console-producer` and `minibroker console-consumer` — kafka-console-producer.sh
and kafka-console-consumer.sh over the reference client.

    printf 'k1:hello\\nk2:world\\n' | minibroker console-producer --bootstrap-server \\
        127.0.0.1:9092 --topic t --property parse.key=true --property key.separator=:
    minibroker console-consumer --bootstrap-server ... --topic t --from-beginning \\
        --max-messages 2 --property print.key=true --timeout-ms 5000

The producer sends one record per line of stdin (parse.key / key.separator, ignore.error,
null.marker as Kafka's LineMessageReader); the consumer prints each value, with print.key,
print.partition, print.offset, print.timestamp, print.headers, key.separator, line.separator and
null.literal as Kafka's DefaultMessageFormatter. Java class options (--line-reader, --formatter,
deserializers) are refused: they name Java classes.
"""
from __future__ import annotations

import asyncio
import re
import sys
from typing import Any

from minibroker.cli.common import (add_client_flags, bootstrap_parser, client_settings, fail,
                                   probe, read_properties, refuse, security_with)
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.client.records import TopicPartition

_JAVA = "names a Java class; minibroker's tools are Python"
_ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1}


def add_console_tools_parsers(sub) -> None:
    p = bootstrap_parser(sub, "console-producer", __doc__, "send stdin's lines as records")
    add_client_flags(p)
    p.add_argument("--topic", required=True, help="the topic to send to")
    p.add_argument("--property", action="append", default=[], metavar="K=V",
                   help="parse.key, key.separator, ignore.error, null.marker")
    p.add_argument("--producer-property", action="append", default=[], metavar="K=V",
                   help="acks, linger.ms, batch.size, compression.type, client.id, ...")
    p.add_argument("--producer.config", dest="producer_config", metavar="FILE",
                   help="producer properties from a file")
    p.add_argument("--reader-config", metavar="FILE", help="--property values from a file")
    p.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default=None,
                   help="none, gzip, snappy, lz4 or zstd")
    p.add_argument("--batch-size", type=int, default=16384, help="batch.size, in bytes")
    p.add_argument("--request-required-acks", default="-1", choices=sorted(_ACKS),
                   help="acks: all/-1, 1 or 0")
    p.add_argument("--message-send-max-retries", type=int, default=2**31 - 1, help="retries")
    p.add_argument("--retry-backoff-ms", type=int, default=100, help="retry.backoff.ms")
    p.add_argument("--timeout", type=int, default=1000, metavar="MS", help="linger.ms")
    p.add_argument("--request-timeout-ms", type=int, default=1500,
                   help="accepted: --timeout-ms sets the wait for each request")
    p.add_argument("--metadata-expiry-ms", type=int, default=300000,
                   help="accepted (metadata is refreshed when it is stale)")
    p.add_argument("--max-block-ms", type=int, default=60000, help="metadata wait")
    for flag in ("--max-memory-bytes", "--max-partition-memory-bytes", "--socket-buffer-size"):
        p.add_argument(flag, type=int, help="accepted: a Java producer's buffer tuning")
    refuse(p, "--line-reader", _JAVA)
    p.set_defaults(func=lambda args: asyncio.run(_produce(args)))

    c = bootstrap_parser(sub, "console-consumer", __doc__, "print a topic's records")
    add_client_flags(c)
    c.add_argument("--topic", help="the topic to read")
    c.add_argument("--include", metavar="REGEX", help="every topic matching this expression")
    c.add_argument("--partition", type=int, help="only this partition (no group)")
    c.add_argument("--offset", default="latest",
                   help="with --partition: an offset, earliest or latest")
    c.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    c.add_argument("--max-messages", type=int, help="stop after this many records")
    c.add_argument("--group", help="consumer group id (default: none, no commits)")
    c.add_argument("--property", action="append", default=[], metavar="K=V",
                   help="print.key, print.partition, print.offset, print.timestamp, "
                        "print.headers, key.separator, line.separator, null.literal")
    c.add_argument("--formatter-config", metavar="FILE", help="--property values from a file")
    c.add_argument("--consumer-property", action="append", default=[], metavar="K=V",
                   help="group.id, client.id, isolation.level, auto.offset.reset")
    c.add_argument("--consumer.config", dest="consumer_config", metavar="FILE",
                   help="consumer properties from a file")
    c.add_argument("--isolation-level", default="read_uncommitted",
                   choices=("read_committed", "read_uncommitted"),
                   help="read_committed: only records of committed transactions")
    c.add_argument("--skip-message-on-error", action="store_true",
                   help="accepted: records are printed as bytes, nothing fails to decode")
    c.add_argument("--enable-systest-events", action="store_true",
                   help="print Kafka's system-test lifecycle events as JSON")
    for flag in ("--formatter", "--key-deserializer", "--value-deserializer"):
        refuse(c, flag, _JAVA)
    c.set_defaults(func=lambda args: asyncio.run(_consume(args)))


def _props(items: list[str], path: str | None, flag: str) -> dict[str, str]:
    out = read_properties(path, flag) if path else {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq:
            fail(f"{flag} expects KEY=VALUE, got '{item}'")
        out[k.strip()] = v
    return out


def _true(props: dict, key: str) -> bool:
    return props.get(key, "false").strip().lower() == "true"


async def _connect(args, role: str, props_file: str | None) -> tuple[int, dict, dict, Any]:
    """What console-producer and console-consumer (`role`) do first: the request timeout, the
    --property map (with the reader's / formatter's file), the --<role>-property map (with
    --<role>.config), its security settings, and a probe that the cluster answers."""
    ms = int(client_settings(args)["timeout.ms"])
    props = _props(args.property, props_file, "--property")
    conf = _props(getattr(args, f"{role}_property"), getattr(args, f"{role}_config"),
                  f"--{role}-property")
    security = security_with(args, conf, f"--{role}.config")
    (await probe(args.bootstrap_server, f"console-{role}", ms, security)).close()
    return ms, props, conf, security


async def _produce(args) -> None:
    ms, props, conf, security = await _connect(args, "producer", args.reader_config)
    acks = _ACKS.get(conf.get("acks", args.request_required_acks), -1)
    sep, null = props.get("key.separator", "\t"), props.get("null.marker")
    async with Producer(args.bootstrap_server, acks=acks, enable_idempotence=acks == -1,
                        linger_ms=float(conf.get("linger.ms", args.timeout)),
                        batch_size=int(conf.get("batch.size", args.batch_size)),
                        compression=conf.get("compression.type", args.compression_codec),
                        client_id=conf.get("client.id", "console-producer"),
                        retries=args.message_send_max_retries,
                        retry_backoff_ms=args.retry_backoff_ms, request_timeout_ms=ms,
                        metadata_timeout_ms=args.max_block_ms, security=security) as producer:
        pending = []
        for n, line in enumerate(sys.stdin, 1):
            line = line.rstrip("\n")
            key = None
            if _true(props, "parse.key"):
                if sep not in line:
                    if _true(props, "ignore.error"):
                        value = line
                    else:
                        fail(f"No key separator found on line number {n}: '{line}'")
                else:
                    key, value = line.split(sep, 1)
            else:
                value = line
            enc = (lambda s: None if s is None or s == null else s.encode())
            fut = producer.send(args.topic, enc(value), key=enc(key))
            if args.sync:
                await fut
            else:
                pending.append(fut)
        await producer.flush()
        for fut in pending:
            await fut


def _format(rec, props: dict) -> str:
    sep, null = props.get("key.separator", "\t"), props.get("null.literal", "null")
    text = (lambda b: null if b is None else b.decode("utf-8", "replace"))
    parts = []
    if _true(props, "print.timestamp"):
        kind = "CreateTime" if rec.timestamp_type == 0 else "LogAppendTime"
        parts.append(f"{kind}:{rec.timestamp}")
    if _true(props, "print.partition"):
        parts.append(f"Partition:{rec.partition}")
    if _true(props, "print.offset"):
        parts.append(f"Offset:{rec.offset}")
    if _true(props, "print.headers"):
        parts.append(",".join(f"{k}:{text(v)}" for k, v in rec.headers) or "NO_HEADERS")
    if _true(props, "print.key"):
        parts.append(text(rec.key))
    return sep.join(parts + [text(rec.value)])


async def _consume(args) -> None:
    if (args.topic is None) == (args.include is None):
        fail("Exactly one of --include/--topic is required.")
    if args.partition is not None and (args.include or args.group):
        fail("--partition goes with --topic and without --group")
    if args.offset != "latest" and args.partition is None:
        fail("The partition is required when offset is specified.")
    ms, props, conf, security = await _connect(args, "consumer", args.formatter_config)
    group = args.group or conf.get("group.id")
    reset = "earliest" if args.from_beginning else conf.get("auto.offset.reset", "latest")
    consumer = Consumer(args.bootstrap_server, group_id=group, auto_offset_reset=reset,
                        client_id=conf.get("client.id", "console-consumer"),
                        isolation_level=conf.get("isolation.level", args.isolation_level),
                        request_timeout_ms=ms, security=security)
    try:
        await _subscribe(consumer, args)
        await _print_records(consumer, args, props)
    finally:
        await consumer.close()


async def _subscribe(consumer: Consumer, args) -> None:
    if args.partition is not None:
        tp = TopicPartition(args.topic, args.partition)
        consumer.assign([tp])
        if args.offset == "earliest" or args.from_beginning:
            consumer.seek_to_beginning(tp)
        elif args.offset == "latest":
            consumer.seek_to_end(tp)
        else:
            try:
                consumer.seek(tp, int(args.offset))
            except ValueError:
                fail(f"--offset expects a number, earliest or latest, got '{args.offset}'")
        return
    resp = await consumer.metadata.fetch_all()
    if args.include:
        try:
            rx = re.compile(args.include)
        except re.error as e:
            fail(f"--include '{args.include}' is not a regular expression: {e}")
        topics = sorted(t.name for t in resp.topics if rx.fullmatch(t.name))
    else:
        topics = [args.topic]
    if consumer.group_id is not None:
        consumer.subscribe(topics)
        return
    # No group: every partition assigned by hand (Kafka would make up a group id to join).
    known = {t.name: t for t in resp.topics if not t.error_code}
    missing = [t for t in topics if t not in known]
    if missing:
        fail(f"Topic '{missing[0]}' does not exist")
    tps = [TopicPartition(t, p.partition_index) for t in topics for p in known[t].partitions]
    consumer.assign(tps)
    (consumer.seek_to_beginning if args.from_beginning else consumer.seek_to_end)(*tps)


async def _print_records(consumer: Consumer, args, props: dict) -> None:
    """Until --max-messages, or --timeout-ms without a record (Kafka's consumer.timeout)."""
    end = props.get("line.separator", "\n")
    loop = asyncio.get_running_loop()
    idle_ms = args.timeout_ms
    last, count = loop.time(), 0
    while args.max_messages is None or count < args.max_messages:
        records = await consumer.poll(timeout=0.2)
        for rec in records:
            sys.stdout.write(_format(rec, props) + end)
            count += 1
            if args.max_messages is not None and count >= args.max_messages:
                break
        sys.stdout.flush()
        if records or not consumer.assignment():     # joining a group is not idleness
            last = loop.time()
        elif idle_ms is not None and (loop.time() - last) * 1000 >= idle_ms:
            break
    print(f"Processed a total of {count} messages", file=sys.stderr)
