"""`minibroker configs` — kafka-configs.sh's flags and output, over the wire.

    minibroker configs --bootstrap-server 127.0.0.1:9092 --describe --entity-type topics \\
        [--entity-name t] [--all]
    minibroker configs --bootstrap-server ... --describe --entity-type brokers --entity-name 1
    minibroker configs --bootstrap-server ... --alter --entity-type topics --entity-name t \\
        --add-config retention.ms=60000,cleanup.policy=[compact,delete] --delete-config segment.bytes

--describe prints the dynamic (set) configs, --all every config, as `name=value sensitive=false
synonyms={SOURCE:name=value, ...}`. --alter is one IncrementalAlterConfigs request (SET for
--add-config, DELETE for --delete-config); a list value is written in brackets, as Kafka's tool.
"""
from __future__ import annotations

import sys

from kafka.errors import for_code
from kafka.protocol.admin import DescribeConfigsRequest

from minibroker.cli.admin_tool import add_admin_tool_parser
from minibroker.cli.user_configs import alter_users, describe_users
from minibroker.client.admin import BROKER, DELETE, SET, TOPIC, Admin

USERS = -1                  # not a ConfigResource type: SCRAM credentials (cli/user_configs.py)

_TYPES = {"topics": TOPIC, "brokers": BROKER, "users": USERS}
_WORD = {TOPIC: "topic", BROKER: "broker"}
# DescribeConfigsResponse ConfigSource, by Kafka's names.
_SOURCES = {0: "UNKNOWN_CONFIG", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
            3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
            6: "DYNAMIC_BROKER_LOGGER_CONFIG"}
_DYNAMIC = (1, 2, 3, 6)


def add_configs_parser(sub) -> None:
    c = add_admin_tool_parser(sub, "configs", __doc__,
                              "describe and alter topic and broker configs", _main)
    action = c.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="list the entity's configs")
    action.add_argument("--alter", action="store_true", help="add or delete configs")
    c.add_argument("--entity-type", required=True, choices=sorted(_TYPES),
                   help="what to configure")
    c.add_argument("--entity-name", help="topic name or broker id (describe: default all)")
    c.add_argument("--all", action="store_true", help="--describe: every config, not only set ones")
    c.add_argument("--add-config", default="", metavar="K=V,K=[V1,V2]",
                   help="--alter: configs to set")
    c.add_argument("--delete-config", default="", metavar="K,K",
                   help="--alter: configs to remove (back to the default)")


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
    if args.entity_name is None:
        sys.exit("Error: --alter needs --entity-name")
    changes: dict = {k: (SET, v) for k, v in parse_add_config(args.add_config).items()}
    changes.update({k.strip(): (DELETE, None) for k in args.delete_config.split(",") if k.strip()})
    if not changes:
        sys.exit("Error: --alter needs --add-config or --delete-config")
    results = await admin.alter_configs({(rtype, args.entity_name): changes},
                                        raise_on_error=False)
    for e in results.values():
        if e is not None:
            sys.exit(f"Error while executing config command with args '--alter': "
                     f"{type(e).__name__}: {e}")
    print(f"Completed updating config for {_WORD[rtype]} {args.entity_name}.")


async def _describe(admin: Admin, rtype: int, args) -> None:
    if args.entity_name is not None:
        names = [args.entity_name]
    elif rtype == TOPIC:
        names = sorted(await admin.list_topics())
    else:
        await admin.metadata.fetch_all()
        names = [str(b) for b in sorted(admin.metadata.brokers)]
    await admin.metadata.fetch_all()        # the brokers' addresses
    R = DescribeConfigsRequest.DescribeConfigsResource
    for name in names:
        req = DescribeConfigsRequest(resources=[R(resource_type=rtype, resource_name=name,
                                                  configuration_keys=None)],
                                     include_synonyms=True, include_documentation=False)
        # A broker's own configs come from that broker, a topic's from any.
        if rtype == BROKER and name.isdigit():
            resp = await admin.pool.request(int(name), req, lo=1)
        else:
            resp = await admin._to_controller(req, lo=1)
        r = resp.results[0]
        if r.error_code:
            sys.exit(f"Error while executing config command with args '--describe': "
                     f"{for_code(r.error_code).__name__}: {r.error_message or name}")
        kind = "All" if args.all else "Dynamic"
        print(f"{kind} configs for {_WORD[rtype]} {name} are:")
        for c in sorted(r.configs, key=lambda c: c.name):
            if not args.all and c.config_source not in _DYNAMIC:
                continue
            syn = ", ".join(f"{_SOURCES.get(s.source, s.source)}:{s.name}={s.value}"
                            for s in c.synonyms)
            print(f"  {c.name}={'' if c.value is None else c.value} "
                  f"sensitive={str(c.is_sensitive).lower()} synonyms={{{syn}}}")
