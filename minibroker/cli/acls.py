"""`minibroker acls` — kafka-acls.sh's flags and output, over the wire (CreateAcls, DescribeAcls,
DeleteAcls; the brokers need an authorizer: authorizer.class.name, or `serve --acls`).

    minibroker acls --bootstrap-server 127.0.0.1:9092 --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders
    minibroker acls --bootstrap-server ... --add --allow-principal User:bob --producer --topic t
    minibroker acls --bootstrap-server ... --add --allow-principal User:bob --consumer \\
        --topic t --group g
    minibroker acls --bootstrap-server ... --list [--topic t] [--principal User:alice]
    minibroker acls --bootstrap-server ... --remove --force --topic t

Output as kafka-acls.sh prints it: "Current ACLs for resource `ResourcePattern(resourceType=TOPIC,
name=t, patternType=LITERAL)`:" then one tab-indented "(principal=User:alice, host=*,
operation=READ, permissionType=ALLOW)" per ACL. Without --force, --remove asks "(y/n)" first.
--producer: WRITE, DESCRIBE, CREATE on the topics (WRITE, DESCRIBE on --transactional-id; with
--idempotent, IDEMPOTENT_WRITE on the cluster); --consumer: READ, DESCRIBE on the topics, READ on
the groups. --command-config and --timeout-ms as every admin tool (minibroker.cli.common).
"""
from __future__ import annotations

import argparse
import re
import sys

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import fail
from minibroker.client.admin import Admin
from minibroker.security.acl import (CLUSTER_NAME, SUPPORTED_OPERATIONS, WILDCARD, AclBinding,
                                     AclBindingFilter, AclOperation, AclPermissionType,
                                     PatternType, ResourceType)
from minibroker.security.principal import KafkaPrincipal

Op = AclOperation
_PATTERNS = {"LITERAL": PatternType.LITERAL, "PREFIXED": PatternType.PREFIXED,
             "MATCH": PatternType.MATCH, "ANY": PatternType.ANY}
_RESOURCE_FLAGS = (("topic", ResourceType.TOPIC), ("group", ResourceType.GROUP),
                   ("transactional_id", ResourceType.TRANSACTIONAL_ID),
                   ("delegation_token", ResourceType.DELEGATION_TOKEN),
                   ("user_principal", ResourceType.USER))


def operation_name(op: AclOperation) -> str:
    """Kafka's SecurityUtils.operationName: DESCRIBE_CONFIGS -> DescribeConfigs."""
    return "".join(w.capitalize() for w in op.name.split("_"))


def parse_operation(text: str) -> AclOperation:
    """Read, read, READ, DescribeConfigs, describe_configs -> the operation."""
    key = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", text.strip()).upper()
    try:
        op = AclOperation[key]
    except KeyError:
        op = None
    if op is None or op in (Op.UNKNOWN, Op.ANY):
        fail(f"Unknown operation {text!r}; valid: " + ", ".join(
            operation_name(o) for o in AclOperation if o not in (Op.UNKNOWN, Op.ANY)))
    return op


def _principals(values) -> list[str]:
    out = []
    for v in values or ():
        try:
            out.append(str(KafkaPrincipal.parse(v.strip())))
        except ValueError as e:
            fail(str(e))
    return sorted(set(out))


def filter_str(f: AclBindingFilter) -> str:
    name = "<any>" if f.resource_name is None else f.resource_name
    return (f"ResourcePattern(resourceType={f.resource_type.name}, name={name}, "
            f"patternType={f.pattern_type.name})")


def _resource_filters(args, pattern: PatternType, required: bool = True) -> list[AclBindingFilter]:
    out = []
    for flag, rt in _RESOURCE_FLAGS:
        for name in getattr(args, flag) or ():
            out.append(AclBindingFilter(rt, name.strip(), pattern))
    if pattern == PatternType.LITERAL and (args.cluster or args.idempotent):
        out.append(AclBindingFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    if not out and required:
        fail("You must provide at least one resource: --topic <topic> or --cluster or --group "
             "<group> or --delegation-token <Delegation Token ID>")
    return sorted(set(out), key=lambda f: (f.resource_type, f.resource_name or ""))


def _entries(args, operations) -> list[tuple]:
    """(principal, host, operation, permission) for the allow and deny flags."""
    out = []
    for principals, hosts, perm in (
            (_principals(args.allow_principal), args.allow_host, AclPermissionType.ALLOW),
            (_principals(args.deny_principal), args.deny_host, AclPermissionType.DENY)):
        for p in principals:
            for h in sorted({h.strip() for h in hosts} if hosts else {WILDCARD}):
                for op in sorted(set(operations)):
                    out.append((p, h, op, perm))
    return out


def resource_entries(args) -> dict[AclBindingFilter, list[tuple]]:
    """Kafka's getResourceFilterToAcls: each resource filter and the entries it gets."""
    pattern = _PATTERNS[args.resource_pattern_type.upper()]
    filters = _resource_filters(args, pattern)
    out: dict[AclBindingFilter, list[tuple]] = {}
    if not args.producer and not args.consumer:
        ops = [parse_operation(o) for o in (args.operation or ["All"])]
        out = {f: _entries(args, ops) for f in filters}
    if args.producer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out[f] = _entries(args, (Op.WRITE, Op.DESCRIBE, Op.CREATE))
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                out[f] = _entries(args, (Op.WRITE, Op.DESCRIBE))
            elif f.resource_type == ResourceType.CLUSTER and args.idempotent:
                out[f] = _entries(args, (Op.IDEMPOTENT_WRITE,))
    if args.consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out[f] = sorted(set(out.get(f, [])) | set(_entries(args, (Op.READ, Op.DESCRIBE))))
            elif f.resource_type == ResourceType.GROUP:
                out[f] = sorted(set(out.get(f, [])) | set(_entries(args, (Op.READ,))))
    for f, entries in out.items():
        valid = set(SUPPORTED_OPERATIONS[f.resource_type]) | {Op.ALL}
        if any(e[2] not in valid for e in entries):
            fail(f"ResourceType {f.resource_type.name} only supports operations "
                 + ", ".join(operation_name(o) for o in sorted(valid)))
    return out


def _entry_str(e: tuple) -> str:
    p, h, op, perm = e
    return f"(principal={p}, host={h}, operation={op.name}, permissionType={perm.name})"


def _block(title: str, lines: list[str]) -> str:
    """kafka-acls.sh's layout: `title: ` newline ` \\t...` lines, a trailing space, a blank line."""
    return f"{title}: \n " + "\n".join("\t" + s for s in lines) + " \n"


def check(args: argparse.Namespace) -> None:
    actions = [a for a in ("add", "remove", "list") if getattr(args, a)]
    if len(actions) != 1:
        fail("Command must include exactly one action: --list, --add, --remove. ")
    if args.principal and not args.list:
        fail("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        fail("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        fail("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group or args.cluster
                          or args.transactional_id):
        fail("With --consumer you must specify a --topic and a --group and no --cluster or "
             "--transactional-id option should be specified.")
    if args.resource_pattern_type.upper() not in _PATTERNS:
        fail(f"--resource-pattern-type must be one of {', '.join(_PATTERNS)}")


async def _list(admin: Admin, args) -> None:
    pattern = _PATTERNS[args.resource_pattern_type.upper()]
    filters = _resource_filters(args, pattern, required=False) or [AclBindingFilter()]
    found: set[AclBinding] = set()
    for f in filters:
        found |= set(await admin.describe_acls(f))
    by_resource: dict[tuple, list[AclBinding]] = {}
    for b in sorted(found):
        by_resource.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    for principal in (_principals(args.principal) or [None]):
        if principal is not None:
            print(f"ACLs for principal `{principal}`")
        for acls in by_resource.values():
            mine = [b for b in acls if principal is None or b.principal == principal]
            if mine:
                print(_block(f"Current ACLs for resource `{mine[0].pattern_str()}`",
                             [b.entry_str() for b in mine]))


async def _add(admin: Admin, args) -> None:
    pattern = _PATTERNS[args.resource_pattern_type.upper()]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        fail(f"A '--resource-pattern-type' value of '{pattern.name}' is not valid when adding "
             "acls.")
    todo = resource_entries(args)
    if any(not entries for entries in todo.values()):
        fail("You must specify one of: --allow-principal, --deny-principal when trying to add "
             "ACLs.")
    for f, entries in todo.items():
        print(_block(f"Adding ACLs for resource `{filter_str(f)}`",
                     [_entry_str(e) for e in entries]))
        await admin.create_acls([AclBinding(f.resource_type, f.resource_name, f.pattern_type,
                                            p, h, op, perm) for p, h, op, perm in entries])


def _confirm(args, message: str) -> bool:
    if args.force:
        return True
    print(message)
    return sys.stdin.readline().strip().lower() == "y"


async def _remove(admin: Admin, args) -> None:
    for f, entries in resource_entries(args).items():
        if not entries:
            if _confirm(args, "Are you sure you want to delete all ACLs for resource filter "
                              f"`{filter_str(f)}`? (y/n)"):
                await admin.delete_acls([f])
            continue
        lines = "\n".join("\t" + _entry_str(e) for e in entries)
        if _confirm(args, f"Are you sure you want to remove ACLs: \n {lines} \n from resource "
                          f"filter `{filter_str(f)}`? (y/n)"):
            await admin.delete_acls([AclBindingFilter(
                f.resource_type, f.resource_name, f.pattern_type, p, h, op, perm)
                for p, h, op, perm in entries])


async def _main(admin: Admin, args) -> None:
    if args.add:
        await _add(admin, args)
    elif args.remove:
        await _remove(admin, args)
    else:
        await _list(admin, args)


def add_acls_parser(sub) -> None:
    p = add_admin_tool_parser(sub, "acls", __doc__, "add, remove and list ACLs (kafka-acls.sh)",
                              _main, check=check)
    for flag, help_ in (("--add", "add ACLs"), ("--remove", "remove ACLs"),
                        ("--list", "list ACLs (of the resources given, else all)"),
                        ("--cluster", "the cluster resource"),
                        ("--producer", "the ACLs a producer needs"),
                        ("--consumer", "the ACLs a consumer needs"),
                        ("--idempotent", "--producer: also IDEMPOTENT_WRITE on the cluster"),
                        ("--force", "assume yes to every question")):
        p.add_argument(flag, action="store_true", help=help_)
    many = dict(action="append", default=None)
    p.add_argument("--topic", metavar="TOPIC", help="a topic resource", **many)
    p.add_argument("--group", metavar="GROUP", help="a consumer group resource", **many)
    p.add_argument("--transactional-id", metavar="ID", help="a transactional id resource",
                   **many)
    p.add_argument("--delegation-token", metavar="ID", help="a delegation token resource", **many)
    p.add_argument("--user-principal", metavar="USER", help="a user resource", **many)
    p.add_argument("--resource-pattern-type", default="LITERAL",
                   metavar="{LITERAL,PREFIXED,MATCH,ANY}",
                   help="pattern type of the resources (MATCH and ANY: --list/--remove only)")
    p.add_argument("--operation", metavar="OP", help="operation allowed or denied (default: "
                   "All), e.g. Read, Write, Describe, DescribeConfigs", **many)
    p.add_argument("--allow-principal", metavar="TYPE:NAME", help="principal allowed", **many)
    p.add_argument("--deny-principal", metavar="TYPE:NAME", help="principal denied", **many)
    p.add_argument("--allow-host", metavar="HOST", help="host the allowed principals may come "
                   "from (default: * when --allow-principal is given)", **many)
    p.add_argument("--deny-host", metavar="HOST", help="host the denied principals are denied "
                   "from (default: * when --deny-principal is given)", **many)
    p.add_argument("--principal", metavar="TYPE:NAME", help="--list: only this principal's ACLs",
                   **many)
