"""`minibroker topics` — kafka-topics.sh's flags and output, talking to any broker over the wire.

    minibroker topics --bootstrap-server 127.0.0.1:9092 --create --topic t --partitions 3 \\
        --replication-factor 3 --config retention.ms=60000 [--if-not-exists]
    minibroker topics --bootstrap-server ... --create --topic t --replica-assignment 1:2,2:3,3:1
    minibroker topics --bootstrap-server ... --alter --topic t --partitions 6
    minibroker topics --bootstrap-server ... --alter --topic t --partitions 4 --delete-partitions
    minibroker topics --bootstrap-server ... --list [--exclude-internal] [--topic REGEX]
    minibroker topics --bootstrap-server ... --describe [--topic REGEX] \\
        [--under-replicated-partitions | --under-min-isr-partitions | --at-min-isr-partitions |
         --unavailable-partitions | --topics-with-overrides]
    minibroker topics --bootstrap-server ... --delete --topic t [--if-exists]

--topic is a regular expression (matched whole) except with --create, as in Kafka. Lowering a
partition count is a KIP-253 deletion: refused unless --delete-partitions is given, and then the
command returns once every broker serves the new count (the deleted partitions are marked, stay
readable, and are removed when retention or DeleteRecords has emptied them).
"""
from __future__ import annotations

import asyncio
import re

from kafka.errors import TopicAlreadyExistsError

from minibroker.cli.admin_tool import add_admin_tool_parser, timeout_ms
from minibroker.cli.common import add_switches, broker_reason, fail, refuse
from minibroker.cli.topics_describe import describe, matching_topics
from minibroker.client.admin import Admin, NewTopic

ACTIONS = ("create", "alter", "delete", "list", "describe")
REPORTS = ("under_replicated_partitions", "under_min_isr_partitions", "at_min_isr_partitions",
           "unavailable_partitions")


def add_topics_parser(sub) -> None:
    t = add_admin_tool_parser(sub, "topics", __doc__,
                              "create, alter, delete, list, describe topics", _main, check=_check)
    g = t.add_mutually_exclusive_group(required=True)
    for action, what in (("create", "Create a new topic."),
                         ("alter", "Alter the number of partitions and replica assignment."),
                         ("delete", "Delete a topic."), ("list", "List all available topics."),
                         ("describe", "List details for the given topics.")):
        g.add_argument(f"--{action}", action="store_true", help=what)
    t.add_argument("--topic", help="topic name; a regular expression except with --create")
    t.add_argument("--topic-id", help="--describe: the topic with this id")
    t.add_argument("--partitions", type=int, default=None,
                   help="partition count (--create: default num.partitions)")
    t.add_argument("--delete-partitions", action="store_true",
                   help="--alter: allow --partitions below the current count (KIP-253 deletion)")
    t.add_argument("--replication-factor", type=int, default=None,
                   help="replicas per partition (default default.replication.factor)")
    t.add_argument("--replica-assignment", metavar="B1:B2,B1:B2,...",
                   help="brokers of each partition (--create), or of the new ones (--alter)")
    t.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="--create: a topic config, e.g. retention.ms=60000 (repeat)")
    refuse(t, "--delete-config", "no longer supported since Kafka 4.0: use `minibroker configs "
           "--alter --entity-type topics --entity-name TOPIC --delete-config NAME`")
    add_switches(t, ("--if-exists",
                     "--alter/--delete/--describe: do nothing when the topic does not exist"),
                 ("--if-not-exists", "--create: do nothing when the topic exists"),
                 ("--exclude-internal", "--list/--describe: leave out internal topics"),
                 *((f"--{flag}", f"--describe: only partitions with {what}") for flag, what in (
                     ("under-replicated-partitions", "ISR smaller than the replicas"),
                     ("under-min-isr-partitions", "ISR smaller than min.insync.replicas"),
                     ("at-min-isr-partitions", "ISR equal to min.insync.replicas"),
                     ("unavailable-partitions", "no live leader"))))
    t.add_argument("--topics-with-overrides", action="store_true",
                   help="--describe: only topics that override a config, without partitions")
    t.add_argument("--partition-size-limit-per-response", type=int, default=None, metavar="N",
                   help="--describe: accepted for scripts; this tool reads Metadata, unpaged")


def _check(args) -> None:
    if (args.create or args.alter or args.delete) and not args.topic:
        fail("--create, --alter and --delete need --topic")
    if args.alter and args.config:
        fail("--config works only with --create; to change a topic's configs use "
             "`minibroker configs --alter --entity-type topics`")
    if args.alter and args.partitions is None and not args.replica_assignment:
        fail("--alter needs --partitions")
    if args.delete_partitions and not args.alter:
        fail("--delete-partitions goes with --alter --partitions N")
    if args.create and args.partitions is not None and args.partitions < 1:
        fail("The partitions must be greater than 0")
    if args.create and args.replication_factor is not None and \
            not 1 <= args.replication_factor <= 32767:
        fail("The replication factor must be between 1 and 32767 inclusive")
    if args.replica_assignment and args.create and (args.partitions or args.replication_factor):
        fail("--replica-assignment sets the partitions and replicas: leave out --partitions "
             "and --replication-factor")
    if args.topic and not args.create:
        try:
            re.compile(args.topic)
        except re.error as e:
            fail(f"--topic {args.topic!r} is not a regular expression: {e}")


def parse_replica_assignment(text: str) -> list[list[int]]:
    """"1:2,2:3" -> [[1, 2], [2, 3]]: one entry per partition, brokers split by ':'."""
    out = []
    for i, part in enumerate(text.split(",")):
        try:
            brokers = [int(b) for b in part.split(":")]
        except ValueError:
            fail(f"--replica-assignment: partition {i} '{part}' is not broker ids like 1:2:3")
        if len(set(brokers)) != len(brokers):
            fail(f"--replica-assignment: partition {i} repeats a broker: {part}")
        out.append(brokers)
    if len({len(b) for b in out}) > 1:
        fail("--replica-assignment: every partition needs the same number of replicas")
    return out


async def _main(admin: Admin, args) -> None:
    if args.create:
        await _create(admin, args)
    elif args.alter:
        await _alter(admin, args)
    elif args.delete:
        await _delete(admin, args)
    elif args.list:
        for name in await matching_topics(admin, args.topic, args.exclude_internal):
            print(name)
    else:
        await describe(admin, args)


async def _create(admin: Admin, args) -> None:
    configs = {}
    for c in args.config:
        k, eq, v = c.partition("=")
        if not eq or not k.strip():
            fail(f"--config expects NAME=VALUE, got {c!r}")
        configs[k.strip()] = v.strip()
    topic = NewTopic(args.topic, -1 if args.partitions is None else args.partitions,
                     -1 if args.replication_factor is None else args.replication_factor, configs)
    if args.replica_assignment:
        topic.assignments = dict(enumerate(parse_replica_assignment(args.replica_assignment)))
    if "." in args.topic or "_" in args.topic:
        print("WARNING: Due to limitations in metric names, topics with a period ('.') or "
              "underscore ('_') could collide. To avoid issues it is best to use either, "
              "but not both.")
    err = (await admin.create_topics([topic], raise_on_error=False))[args.topic]
    if isinstance(err, TopicAlreadyExistsError) and args.if_not_exists:
        return
    if err is not None:
        fail(f"Error while executing topic command : {_reason(err)}")
    print(f"Created topic {args.topic}.")


_reason = broker_reason


async def _existing(admin: Admin, args) -> list[str]:
    names = await matching_topics(admin, args.topic, args.exclude_internal)
    if not names and not args.if_exists:
        fail(f"Topic '{args.topic}' does not exist as expected")
    return names


async def _delete(admin: Admin, args) -> None:
    names = await _existing(admin, args)
    if not names:
        return
    for name, err in (await admin.delete_topics(names, raise_on_error=False)).items():
        if err is not None:
            fail(f"Error while executing topic command : {_reason(err)}")


async def _alter(admin: Admin, args) -> None:
    names = await _existing(admin, args)
    for name in names:
        md = (await admin.describe_topics([name]))[name]
        current = md.producer_partition_count
        count = args.partitions
        new_replicas = None
        if args.replica_assignment:
            full = parse_replica_assignment(args.replica_assignment)
            count = len(full) if count is None else count
            new_replicas = {name: full[current:count]}
        if count < current and not args.delete_partitions:
            fail(f"--partitions {count} is below the {current} partitions of '{name}': this "
                 f"would delete partitions {_span(count, current)} (a KIP-253 deletion); add "
                 "--delete-partitions to do that")
        err = (await admin.create_partitions({name: count}, raise_on_error=False,
                                             assignments=new_replicas))[name]
        if err is not None:
            fail(f"Error while executing topic command : {_reason(err)}")
        if count < current:
            await _await_deletion(admin, name, count, current, timeout_ms(args))


def _span(lo: int, hi: int) -> str:
    return str(lo) if hi - lo == 1 else f"{lo}-{hi - 1}"


async def _await_deletion(admin: Admin, name: str, count: int, before: int,
                          wait_ms: int) -> None:
    """Until every broker serves `count` undeleted partitions: the deletion is committed and
    known cluster-wide, so --describe shows the new count."""
    print(f"Deleting partitions {_span(count, before)} of {name} (KIP-253): waiting until every "
          "broker serves the new count...", flush=True)
    loop = asyncio.get_running_loop()
    end = loop.time() + wait_ms / 1000
    shown = None
    while True:
        counts = await admin.partition_counts_by_broker(name)
        behind = sorted(b for b, (_, u) in counts.items() if u != count)
        if not behind:
            break
        if behind != shown:
            print(f"  {len(counts) - len(behind)} of {len(counts)} brokers serve {count} "
                  f"partitions (waiting for broker{'s' if len(behind) > 1 else ''} "
                  f"{', '.join(map(str, behind))})", flush=True)
            shown = behind
        if loop.time() > end:
            fail(f"the deletion was committed, but brokers {behind} still did not serve {count} "
                 f"partitions of '{name}' after {wait_ms} ms")
        await asyncio.sleep(0.05)
    print(f"Partitions {_span(count, before)} of {name} are marked for deletion; {name} has "
          f"{count} partitions. The marked partitions stay readable and are removed once "
          "retention or DeleteRecords has emptied them.")
