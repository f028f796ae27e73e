"""`minibroker configs` — kafka-configs.sh's flags and output, over the wire.

    minibroker configs --bootstrap-server 127.0.0.1:9092 --describe --entity-type topics \\
        [--entity-name t] [--all]                              (or --topic t)
    minibroker configs --bootstrap-server ... --describe --entity-type brokers --entity-name 1
    minibroker configs --bootstrap-server ... --describe --entity-type brokers --entity-default
    minibroker configs --bootstrap-server ... --alter --entity-type topics --entity-name t \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.bytes
    minibroker configs --bootstrap-server ... --alter --broker-defaults \\
        --add-config log.retention.ms=3600000                  (KIP-226 dynamic broker configs)

--describe prints the dynamic (set) configs, --all every config, as `name=value sensitive=false
synonyms={SOURCE:name=value, ...}`. --alter is one IncrementalAlterConfigs request (SET for
--add-config and --add-config-file, DELETE for --delete-config); a list value is written in
brackets, as Kafka's tool. --entity-default / --broker-defaults is the cluster default of every
broker (resource name "").
"""
from __future__ import annotations

import sys

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.common import (broker_reason, fail, read_properties, refuse,
                                   refuse_bootstrap_controller)
from minibroker.cli.user_configs import alter_users, describe_users
from minibroker.client.admin import BROKER, DELETE, SET, TOPIC, Admin

USERS = -1                  # not a ConfigResource type: SCRAM credentials (cli/user_configs.py)

# Entity types this tool configures (DescribeConfigs / IncrementalAlterConfigs, or SCRAM).
_TYPES = {"topics": TOPIC, "brokers": BROKER, "users": USERS}
# Kafka's other entity types, and why they cannot apply here.
_REFUSED_TYPES = {
    "clients": "minibroker serves no client quotas (DescribeClientQuotas/AlterClientQuotas)",
    "ips": "minibroker serves no client quotas (DescribeClientQuotas/AlterClientQuotas)",
    "broker-loggers": "minibroker's brokers log through Python's logging, not log4j loggers",
}
_WORD = {TOPIC: "topic", BROKER: "broker"}
# DescribeConfigsResponse ConfigSource, by Kafka's names.
_SOURCES = {0: "UNKNOWN_CONFIG", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
            3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
            6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
_DYNAMIC_TOPIC, _DYNAMIC_BROKER, _DYNAMIC_DEFAULT = 1, 2, 3


def add_configs_parser(sub) -> None:
    c = add_admin_tool_parser(sub, "configs", __doc__,
                              "describe and alter topic and broker configs", _main, check=_check)
    action = c.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list the entity's configs")
    action.add_argument("--alter", action="store_true", help="add or delete configs")
    c.add_argument("--entity-type", action="append", default=[],
                   choices=sorted(_TYPES) + sorted(_REFUSED_TYPES), help="what to configure")
    c.add_argument("--entity-name", action="append", default=[],
                   help="topic name or broker id (describe: default all)")
    c.add_argument("--entity-default", action="store_true",
                   help="brokers: the cluster default (every broker without its own value)")
    c.add_argument("--topic", help="= --entity-type topics --entity-name TOPIC")
    c.add_argument("--broker", help="= --entity-type brokers --entity-name ID")
    c.add_argument("--broker-defaults", action="store_true",
                   help="= --entity-type brokers --entity-default")
    c.add_argument("--all", action="store_true", help="--describe: every config, not only set ones")
    c.add_argument("--add-config", default="", metavar="K=V,K=[V1,V2]",
                   help="--alter: configs to set")
    c.add_argument("--add-config-file", metavar="FILE",
                   help="--alter: configs to set, from a Java-properties file")
    c.add_argument("--delete-config", default="", metavar="K,K",
                   help="--alter: configs to remove (back to the default)")
    c.add_argument("--force", action="store_true", help="accepted, as in Kafka (no effect)")
    for flag in ("--client", "--ip"):
        refuse(c, flag, _REFUSED_TYPES[flag[2:] + "s"])
    for flag in ("--client-defaults", "--ip-defaults"):
        refuse(c, flag, _REFUSED_TYPES["clients"], takes_value=False)
    refuse(c, "--broker-logger", _REFUSED_TYPES["broker-loggers"])
    refuse_bootstrap_controller(c)
    refuse(c, "--zk-tls-config-file", "minibroker, like Kafka 4, has no ZooKeeper")


def _check(args) -> None:
    """Fold the shorthand flags into (entity_type, entity_name, entity_default)."""
    if args.topic is not None:
        args.entity_type.append("topics")
        args.entity_name.append(args.topic)
    if args.broker is not None:
        args.entity_type.append("brokers")
        args.entity_name.append(args.broker)
    if args.broker_defaults:
        args.entity_type.append("brokers")
        args.entity_default = True
    if len(args.entity_type) != 1:
        fail("exactly one entity type is required: --entity-type, --topic, --broker or "
             "--broker-defaults" if not args.entity_type else
             "only one entity type may be given (--entity-type, --topic, --broker, "
             "--broker-defaults)")
    args.entity_type = args.entity_type[0]
    if args.entity_type in _REFUSED_TYPES:
        fail(f"--entity-type {args.entity_type}: {_REFUSED_TYPES[args.entity_type]}")
    if len(args.entity_name) > 1 or (args.entity_name and args.entity_default):
        fail("only one of --entity-name and --entity-default may be given")
    args.entity_name = args.entity_name[0] if args.entity_name else None
    if args.entity_default and args.entity_type != "brokers":
        fail("--entity-default applies here to brokers only (the cluster default)")
    if args.entity_name is not None and args.entity_type == "brokers" and \
            not args.entity_name.isdigit():
        fail(f"The entity name for brokers must be a valid integer broker id, but it is: "
             f"{args.entity_name}")


def parse_add_config(text: str) -> dict[str, str]:
    """k=v,k2=[a,b] -> {k: v, k2: "a,b"} (Kafka's bracket syntax for list values)."""
    out: dict[str, str] = {}
    depth, item = 0, ""
    for ch in text + ",":
        if ch == "," and depth == 0:
            if item.strip():
                key, eq, value = item.partition("=")
                if not eq:
                    sys.exit(f"Error: --add-config entry '{item}' is not key=value")
                out[key.strip()] = value.strip().removeprefix("[").removesuffix("]")
            item = ""
            continue
        depth += (ch == "[") - (ch == "]")
        item += ch
    return out


async def _main(admin: Admin, args) -> None:
    rtype = _TYPES[args.entity_type]
    if rtype == USERS:
        if args.alter:
            await alter_users(admin, args, parse_add_config(args.add_config))
        else:
            await describe_users(admin, args)
        return
    if args.alter:
        await _alter(admin, rtype, args)
    else:
        await _describe(admin, rtype, args)


async def _alter(admin: Admin, rtype: int, args) -> None:
    if args.entity_name is None and not args.entity_default:
        sys.exit("Error: --alter needs --entity-name" + (" or --entity-default"
                                                         if rtype == BROKER else ""))
    name = "" if args.entity_default else args.entity_name
    adds = read_properties(args.add_config_file, "--add-config-file") if args.add_config_file else {}
    adds.update(parse_add_config(args.add_config))
    changes: dict = {k: (SET, v) for k, v in adds.items()}
    changes.update({k.strip(): (DELETE, None) for k in args.delete_config.split(",") if k.strip()})
    if not changes:
        sys.exit("Error: --alter needs --add-config, --add-config-file or --delete-config")
    results = await admin.alter_configs({(rtype, name): changes}, raise_on_error=False)
    for e in results.values():
        if e is not None:
            sys.exit(f"Error while executing config command with args '--alter': "
                     f"{broker_reason(e)}")
    if name == "":
        print(f"Completed updating default config for {args.entity_type} in the cluster.")
    else:
        print(f"Completed updating config for {_WORD[rtype]} {name}.")


async def _names(admin: Admin, rtype: int, args) -> list[str]:
    if args.entity_default:
        return [""]
    if args.entity_name is not None:
        return [args.entity_name]
    if rtype == TOPIC:
        resp = await admin.metadata.fetch_all()
        return sorted(t.name for t in resp.topics if not t.error_code)
    await admin.metadata.fetch_all()
    return [str(b) for b in sorted(admin.metadata.brokers)] + [""]


async def _describe(admin: Admin, rtype: int, args) -> None:
    await admin.metadata.fetch_all()        # the brokers' addresses
    for name in await _names(admin, rtype, args):
        try:
            entries = (await admin.describe_config_entries([(rtype, name)], synonyms=True))[
                (rtype, name)]
        except Exception as e:  # noqa: BLE001 — a Kafka error for this entity: one line
            sys.exit(f"Error while executing config command with args '--describe': "
                     f"{broker_reason(e)}")
        if name == "":
            print(f"Default configs for {args.entity_type} in the cluster are:")
            wanted = (_DYNAMIC_DEFAULT,)
        else:
            print(f"{'All' if args.all else 'Dynamic'} configs for {_WORD[rtype]} {name} are:")
            wanted = None if args.all else (_DYNAMIC_TOPIC if rtype == TOPIC else
                                            _DYNAMIC_BROKER,)
        for c in sorted(entries, key=lambda c: c.name):
            if wanted is not None and c.config_source not in wanted:
                continue
            syn = ", ".join(f"{_SOURCES.get(s.source, s.source)}:{s.name}={s.value}"
                            for s in c.synonyms)
            print(f"  {c.name}={'' if c.value is None else c.value} "
                  f"sensitive={str(c.is_sensitive).lower()} synonyms={{{syn}}}")
