"""`minibroker consumer-groups` — kafka-consumer-groups.sh's flags and output, over the wire.

    minibroker consumer-groups --bootstrap-server 127.0.0.1:9092 --list [--state [S]] [--type [T]]
    minibroker consumer-groups --bootstrap-server ... --describe --group g | --all-groups \\
        [--offsets | --members [--verbose] | --state]
    minibroker consumer-groups --bootstrap-server ... --reset-offsets --group g | --all-groups \\
        --topic t[:0,1] | --all-topics  --to-earliest | --to-latest | --to-offset N | \\
        --shift-by N | --to-current | --to-datetime T | --by-duration D | --from-file CSV \\
        --dry-run | --execute  [--export]
    minibroker consumer-groups --bootstrap-server ... --delete-offsets --group g --topic t[:P,P]
    minibroker consumer-groups --bootstrap-server ... --delete --group g | --all-groups

Classic groups are described with DescribeGroups, KIP-848 groups with ConsumerGroupDescribe;
lag is the log end offset (the high watermark) minus the committed offset. As in Kafka, offsets
are reset only while the group has no members (Empty or Dead), and --execute is needed to
write them (without it the tool prints the plan, like --dry-run).
"""
from __future__ import annotations

import sys

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import add_switches, fail, positive_ms
from minibroker.cli.groups_reset import (INACTIVE, delete_offsets, plan_reset, print_plans,
                                         target_given)
from minibroker.client.admin import Admin
from minibroker.client.records import TopicPartition



def add_groups_parser(sub) -> None:
    g = add_admin_tool_parser(sub, "consumer-groups", __doc__,
                              "list, describe, reset offsets of and delete consumer groups",
                              _main, check=_check)
    action = g.add_mutually_exclusive_group(required=True)
    add_switches(action, ("--list", "list every group"),
                 ("--describe", "committed offsets, log end offsets, lag and members of --group"),
                 ("--reset-offsets", "reset the committed offsets of an inactive --group"),
                 ("--delete", "delete an empty --group"),
                 ("--delete-offsets", "delete --group's committed offsets of --topic (KIP-496)"))
    g.add_argument("--group", action="append", default=[], help="group id (repeat for several)")
    add_switches(g, ("--all-groups", "--describe/--reset-offsets/--delete: every group"))
    add_switches(g.add_mutually_exclusive_group(),
                 ("--offsets", "--describe: offsets and lag per partition (the default)"),
                 ("--members", "--describe: the members and how many partitions each has"))
    g.add_argument("--state", nargs="?", const="", default=None, metavar="STATES",
                   help="--describe: coordinator, strategy, state, member count; --list: the "
                        "state column, only groups in these comma-separated states if given")
    g.add_argument("--type", nargs="?", const="", default=None, metavar="TYPES",
                   help="--list: the type column (classic, consumer), only these if given")
    add_switches(g, ("--verbose", "--describe --members: each member's partitions too"))
    g.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P...]",
                   help="--reset-offsets/--delete-offsets: a topic, or some of its partitions")
    add_switches(g, ("--all-topics", "--reset-offsets: every topic the group has offsets for"))
    to = g.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true", help="to the log start offset")
    to.add_argument("--to-latest", action="store_true", help="to the log end offset")
    to.add_argument("--to-offset", type=int, help="to this offset (kept within the log)")
    to.add_argument("--shift-by", type=int, help="committed offset + N (kept within the log)")
    to.add_argument("--to-current", action="store_true", help="to the committed offset")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss",
                    help="to the first offset at or after this time (optional zone)")
    to.add_argument("--by-duration", metavar="PnDTnHnMnS",
                    help="to the first offset at or after now minus this duration")
    to.add_argument("--from-file", metavar="CSV",
                    help="to the offsets in this CSV (topic,partition,offset)")
    add_switches(g.add_mutually_exclusive_group(),
                 ("--dry-run", "print the new offsets only (default)"),
                 ("--execute", "commit the new offsets"))
    add_switches(g, ("--export", "--reset-offsets: print the plan as CSV, for --from-file"))
    g.add_argument("--timeout", type=positive_ms, dest="timeout_ms", metavar="MS",
                   help="Kafka's name for --timeout-ms in this tool")


def _check(args) -> None:
    if args.all_groups and args.group:
        fail("--all-groups and --group cannot be given together")
    if not args.list and not args.group and not args.all_groups:
        fail("--group or --all-groups is required with --describe, --reset-offsets, "
             "--delete and --delete-offsets")
    if args.delete_offsets and (args.all_groups or len(args.group) != 1 or not args.topic):
        fail("--delete-offsets needs one --group and --topic")
    if args.reset_offsets and not target_given(args):
        fail("--reset-offsets needs one of --to-earliest, --to-latest, --to-offset, "
             "--shift-by, --to-current, --to-datetime, --by-duration, --from-file")
    if args.export and not args.reset_offsets:
        fail("--export goes with --reset-offsets")
    if args.type is not None and not args.list:
        fail("--type goes with --list")


async def _main(admin: Admin, args) -> None:
    groups = await admin.list_groups_typed() if not args.list or args.state is not None \
        or args.type is not None else None
    names = sorted(groups) if args.all_groups else args.group
    if args.list:
        await _list(admin, args, groups)
    elif args.describe:
        for group in names:
            if args.members:
                await _describe_members(admin, group, groups.get(group), args.verbose)
            elif args.state is not None:
                await _describe_state(admin, group, groups.get(group))
            else:
                await _describe(admin, group, groups.get(group))
    elif args.reset_offsets:
        await _reset(admin, args, names, groups)
    elif args.delete_offsets:
        await delete_offsets(admin, names[0], args.topic)
    else:
        await _delete(admin, names)


async def _list(admin: Admin, args, groups: dict | None) -> None:
    if groups is None:
        for group in await admin.list_groups_typed():
            print(group)
        return
    states = {s.strip().lower() for s in (args.state or "").split(",") if s.strip()}
    types = {t.strip().lower() for t in (args.type or "").split(",") if t.strip()}
    rows = [(g, kind, state) for g, (_, state, kind) in groups.items()
            if (not states or state.lower() in states) and (not types or kind.lower() in types)]
    width = max([15] + [len(g) for g, _, _ in rows]) + 10
    cols = [("GROUP", 0, width)] + ([("TYPE", 1, 20)] if args.type is not None else []) + \
        ([("STATE", 2, 20)] if args.state is not None else [])
    for row in [("GROUP", "TYPE", "STATE")] + rows:
        print(" ".join(f"{row[i]:<{w}}" for _, i, w in cols))


async def _members(admin: Admin, group: str, kind: tuple | None) -> tuple[str, list[dict]]:
    """(state, members) of a classic or a KIP-848 group; ("Dead", []) when unknown."""
    state, members, _ = await _group(admin, group, kind)
    return state, members


async def _group(admin: Admin, group: str, kind: tuple | None) -> tuple[str, list[dict], str]:
    """(state, members, assignment strategy) of a classic or a KIP-848 group."""
    if kind is None:
        return "Dead", [], ""
    if kind[2] == "consumer":
        d = (await admin.describe_consumer_groups([group]))[group]
        return d["state"], d["members"], d["assignor"]
    d = (await admin.describe_groups([group]))[group]
    return d["state"], d["members"], d["protocol"] or ""


def _missing(group: str) -> None:
    print(f"Error: Consumer group '{group}' does not exist.", file=sys.stderr)
    sys.exit(1)


async def _describe_members(admin: Admin, group: str, kind: tuple | None,
                            verbose: bool) -> None:
    if kind is None:
        _missing(group)
    state, members, _ = await _group(admin, group, kind)
    if not members:
        print(f"\nConsumer group '{group}' has no active members.")
        return
    rows = []
    for m in sorted(members, key=lambda m: m["member_id"]):
        parts = {t: sorted(ps) for t, ps in sorted(m["assignment"].items()) if ps}
        row = (group, m["member_id"], m["client_host"], m["client_id"],
               sum(len(ps) for ps in parts.values()))
        if verbose:
            row += (", ".join(f"{t}({','.join(map(str, ps))})" for t, ps in parts.items())
                    or "-",)
        rows.append(row)
    headers = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS") + \
        (("ASSIGNMENT",) if verbose else ())
    print(_table(rows, headers, [None, None, None, None, 15, None][:len(headers)]))


async def _describe_state(admin: Admin, group: str, kind: tuple | None) -> None:
    if kind is None:
        _missing(group)
    state, members, strategy = await _group(admin, group, kind)
    node = await admin._coordinator(group)
    host, port = admin.pool.addresses.get(node, ("?", -1))
    print(_table([(group, f"{host}:{port} ({node})", strategy or "", state, len(members))],
                 ("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                 [None, None, 20, 20, None]))


def _table(rows: list[tuple], headers: tuple, widths: list[int | None]) -> str:
    """Kafka's layout: each column left-aligned to max(its fixed width, longest value)."""
    cols = []
    for i, w in enumerate(widths):
        cols.append(max([15] + [len(str(r[i])) for r in [headers] + rows]) if w is None else w)
    lines = []
    for r in [headers] + rows:
        cells = [f"{str(v):<{cols[i]}}" for i, v in enumerate(r[:-1])] + [str(r[-1])]
        lines.append(" ".join(cells))
    return "\n" + "\n".join(lines)


async def _describe(admin: Admin, group: str, kind: tuple | None) -> None:
    if kind is None:
        _missing(group)
    state, members = await _members(admin, group, kind)
    committed = await admin.list_group_offsets(group)
    owner: dict[TopicPartition, dict] = {}
    for m in members:
        for topic, parts in m["assignment"].items():
            for p in parts:
                owner[TopicPartition(topic, p)] = m
    tps = sorted(set(committed) | set(owner))
    ends = {tp: off for tp, (off, _) in (await admin.list_offsets(
        {tp: "latest" for tp in tps})).items()} if tps else {}
    if not members and state.lower() in INACTIVE:
        print(f"\nConsumer group '{group}' has no active members.")
    rows = []
    for tp in tps:
        cur, end, m = committed.get(tp), ends.get(tp), owner.get(tp)
        lag = end - cur if cur is not None and end is not None else "-"
        rows.append((group, tp.topic, tp.partition, "-" if cur is None else cur,
                     "-" if end is None else end, lag,
                     m["member_id"] if m else "-", m["client_host"] if m else "-",
                     m["client_id"] if m else "-"))
    # Members without partitions are listed too, as Kafka does.
    for m in members:
        if not any(m["assignment"].values()):
            rows.append((group, "-", "-", "-", "-", "-", m["member_id"], m["client_host"],
                         m["client_id"]))
    print(_table(rows, ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                        "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"),
                 [None, None, 10, 15, 15, 15, None, None, None]))


async def _reset(admin: Admin, args, groups: list[str], kinds: dict) -> None:
    if not args.execute and not args.dry_run and not args.export:
        print("WARN: No action will be performed as the --execute option is missing. "
              "In a future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. "
              "You should add the --dry-run option explicitly if you are scripting this "
              "command and want to keep the current default behavior without prompting.")
    plans = {}
    for group in groups:
        state, _ = await _members(admin, group, kinds.get(group))
        plans[group] = await plan_reset(admin, args, group, state)
    if args.execute:
        for group, plan in plans.items():
            await admin.alter_group_offsets(group, plan)
    print_plans(plans, args.export, _table)


async def _delete(admin: Admin, groups: list[str]) -> None:
    results = await admin.delete_groups(groups, raise_on_error=False)
    failed = {g: e for g, e in results.items() if e is not None}
    if not failed:
        quoted = ", ".join(f"'{g}'" for g in groups)
        print(f"Deletion of requested consumer groups ({quoted}) was successful.")
        return
    print("Deletion of some consumer groups failed:", file=sys.stderr)
    for g, e in sorted(failed.items()):
        print(f"* Group '{g}' could not be deleted due to: {type(e).__name__}", file=sys.stderr)
    sys.exit(1)
