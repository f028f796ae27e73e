"""`minibroker leader-election` — kafka-leader-election.sh (ElectLeaders, key 43; KIP-183/460).

    minibroker leader-election --bootstrap-server 127.0.0.1:9092 --election-type preferred \\
        --all-topic-partitions
    minibroker leader-election --bootstrap-server ... --election-type unclean --topic t \\
        --partition 0
    minibroker leader-election --bootstrap-server ... --election-type preferred \\
        --path-to-json-file partitions.json     # {"partitions": [{"topic": "t", "partition": 0}]}
"""
from __future__ import annotations


from kafka.errors import ElectionNotNeededError

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import fail, read_json_file
from minibroker.client.admin import Admin
from minibroker.client.records import TopicPartition

_TYPES = {"preferred": 0, "unclean": 1}


def add_leader_election_parser(sub) -> None:
    p = add_admin_tool_parser(sub, "leader-election", __doc__,
                              "elect preferred or unclean leaders (ElectLeaders)", _main,
                              check=_check)
    p.add_argument("--election-type", required=True, type=str.lower, choices=sorted(_TYPES),
                   help="preferred: the first replica if in sync; unclean: any live replica")
    p.add_argument("--all-topic-partitions", action="store_true",
                   help="every partition that needs an election")
    p.add_argument("--topic", help="the partition's topic (with --partition)")
    p.add_argument("--partition", type=int, help="the partition (with --topic)")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help="{\"partitions\": [{\"topic\": ..., \"partition\": N}]}")
    p.add_argument("--admin.config", dest="command_config", metavar="FILE",
                   help="Kafka's name for --command-config in this tool")


def _check(args) -> None:
    given = [bool(args.all_topic_partitions), args.topic is not None,
             args.path_to_json_file is not None]
    if sum(given) != 1:
        fail("One and only one of the following options is required: --all-topic-partitions, "
             "--topic, --path-to-json-file")
    if (args.topic is None) != (args.partition is None):
        fail("--topic and --partition go together")


def _partitions(args) -> list[TopicPartition] | None:
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        return [TopicPartition(args.topic, args.partition)]
    path = args.path_to_json_file
    out = read_json_file(
        path, 'a partition list ({"partitions": [{"topic": ..., "partition": N}]})',
        lambda doc: [TopicPartition(p["topic"], int(p["partition"])) for p in doc["partitions"]])
    if len(set(out)) != len(out):
        fail(f"Replica election data contains duplicate partitions in {path}")
    return out


async def _main(admin: Admin, args) -> None:
    kind = args.election_type.upper()
    results = await admin.elect_leaders(_TYPES[args.election_type], _partitions(args))
    names = {tp: f"{tp.topic}-{tp.partition}" for tp in results}
    order = sorted(results, key=lambda tp: (tp.topic, tp.partition))
    done = [names[tp] for tp in order if results[tp] is None]
    not_needed = [names[tp] for tp in order if isinstance(results[tp], ElectionNotNeededError)]
    failed = [(names[tp], results[tp]) for tp in order
              if results[tp] is not None and not isinstance(results[tp], ElectionNotNeededError)]
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions "
              f"{', '.join(done)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    for name, err in failed:
        print(f"Error completing leader election ({kind}) for partition: {name}: "
              f"{getattr(type(err), 'message', type(err).__name__)}: "
              f"{err.args[0].split(': ', 1)[-1] if err.args else ''}")
    if failed:
        fail(f"{len(failed)} replica(s) could not be elected")
