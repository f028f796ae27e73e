"""`minibroker faults` — faults on demand in a running `minibroker serve --faults` cluster.

    minibroker faults --bootstrap-server 127.0.0.1:9092 error --api Produce \\
        --errors NOT_LEADER_OR_FOLLOWER,DISCONNECT [--broker N] [--count K]
    minibroker faults --bootstrap-server ... latency --broker 2 --ms 300
    minibroker faults --bootstrap-server ... hold --api Fetch [--ms 5000] [--count K] [--broker N]
    minibroker faults --bootstrap-server ... drop --api Metadata [--count K] [--broker N]
    minibroker faults --bootstrap-server ... release [--api Fetch]
    minibroker faults --bootstrap-server ... stop-broker 2 | start-broker 2 | restart-broker 2
    minibroker faults --bootstrap-server ... partition 1 2,3      # cut broker 1 from 2 and 3
    minibroker faults --bootstrap-server ... heal
    minibroker faults --bootstrap-server ... isolate-clients --broker 3 | heal-clients [--broker 3]
    minibroker faults --bootstrap-server ... lose-update-metadata --broker 3 [--count K]
    minibroker faults --bootstrap-server ... slow-update-metadata --broker 3 --ms 2000
    minibroker faults --bootstrap-server ... controller-failover
    minibroker faults --bootstrap-server ... list | clear

Each command is one FaultControl request (private API key 1004) to a bootstrap broker; it prints
what is armed afterwards (JSON) and the active controller. See README, "Faults on demand".
"""
from __future__ import annotations

import argparse
import asyncio
import json

from minibroker.cli.common import (add_client_flags, bootstrap_parser, client_settings, fail,
                                   probe, user_message)
from minibroker.broker.fault_admin import BadCommand, api_key_of, error_code_of
from minibroker.protocol.messages import FaultControlRequest

VERSION = 0


def _broker_ids(text: str) -> list[int]:
    """"2,3" -> [2, 3] (argparse type)."""
    try:
        ids = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid broker ids {text!r}: expected e.g. 2,3") \
            from None
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"invalid broker ids {text!r}: expected e.g. 2,3")
    return ids


def _api(text: str) -> int:
    try:
        return api_key_of(text)
    except BadCommand as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _errors(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    try:
        for n in names:
            error_code_of(n)
    except BadCommand as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not names:
        raise argparse.ArgumentTypeError("no error names given")
    return names


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"invalid value {value}: must be at least 0")
    return value


def add_faults_parser(sub) -> None:
    f = bootstrap_parser(sub, "faults", __doc__, "inject faults into a `serve --faults` cluster")
    add_client_flags(f)
    cmd = f.add_subparsers(dest="fault_command", required=True, metavar="COMMAND")

    def command(name: str, help: str, api=False, broker=False, count=False, ms=False):
        p = cmd.add_parser(name, help=help)
        if api:
            p.add_argument("--api", type=_api, required=api == "required",
                           help="API name (Produce, Fetch, Metadata...) or key")
        if broker:
            p.add_argument("--broker", type=_non_negative, required=broker == "required",
                           help="broker id" + ("" if broker == "required" else
                                               " (default: every broker)"))
        if count:
            p.add_argument("--count", type=_non_negative, default=None,
                           help="how many requests (default: every one until cleared)")
        if ms:
            p.add_argument("--ms", type=_non_negative, required=ms == "required",
                           help="milliseconds")
        return p

    e = command("error", "the next requests of an API answer these errors (or disconnect)",
                api="required", broker=True)
    e.add_argument("--errors", type=_errors, required=True, metavar="NAME[,NAME...]",
                   help="Kafka error names in order, e.g. NOT_LEADER_OR_FOLLOWER, or DISCONNECT")
    e.add_argument("--count", type=_non_negative, default=1,
                   help="push the list this many times")
    command("latency", "every response of a broker is delayed (--ms 0: none)",
            broker="required", ms="required")
    command("hold", "requests of an API are handled --ms later (default: until release)",
            api="required", broker=True, count=True, ms=True)
    command("drop", "requests of an API are never answered", api="required", broker=True,
            count=True)
    command("release", "handle the held requests (of --api, default: all)", api=True)
    for name, what in (("stop-broker", "stop"), ("start-broker", "start"),
                       ("restart-broker", "stop and start")):
        cmd.add_parser(name, help=f"{what} a broker").add_argument(
            "broker", type=_non_negative, help="broker id")
    p = cmd.add_parser("partition", help="cut every broker of one side from the other's")
    p.add_argument("side_a", type=_broker_ids, metavar="SIDE_A", help="broker ids, e.g. 1")
    p.add_argument("side_b", type=_broker_ids, metavar="SIDE_B", help="broker ids, e.g. 2,3")
    cmd.add_parser("heal", help="end every network partition between brokers")
    command("isolate-clients", "no client reaches a broker", broker="required")
    command("heal-clients", "clients reach the broker (default: every broker) again", broker=True)
    command("lose-update-metadata", "a broker's next UpdateMetadata requests are lost",
            broker="required", count=True)
    command("slow-update-metadata", "a broker applies each UpdateMetadata --ms late (0: not)",
            broker="required", ms="required")
    cmd.add_parser("controller-failover", help="the active controller resigns; another is elected")
    cmd.add_parser("list", help="what is armed")
    cmd.add_parser("clear", help="every fault off, partitions healed")
    f.set_defaults(func=lambda args: asyncio.run(_main(args)))


def request(args) -> FaultControlRequest:
    """The FaultControl request for parsed `minibroker faults` arguments."""
    name = args.fault_command
    broker = getattr(args, "broker", None)
    count = getattr(args, "count", None)
    ms = getattr(args, "ms", None)
    api = getattr(args, "api", None)
    return FaultControlRequest(
        command=name, broker_id=-1 if broker is None else broker,
        api_key=-1 if api is None else api, errors=getattr(args, "errors", None) or [],
        count=-1 if count is None else count, ms=-1 if ms is None else ms,
        side_a=getattr(args, "side_a", None) or [], side_b=getattr(args, "side_b", None) or [])


async def _main(args) -> None:
    ms = int(client_settings(args)["timeout.ms"])
    conn = await probe(args.bootstrap_server, "minibroker-faults", ms, args.security)
    try:
        resp = await conn.request(request(args), VERSION, timeout=ms / 1000)
    except Exception as e:  # noqa: BLE001 — the broker closed or timed out: one line
        fail(f"no answer from the cluster: {user_message(e)}")
    finally:
        conn.close()
    if resp.error_code:
        fail(resp.error_message or f"error {resp.error_code}")
    if resp.error_message:
        print(resp.error_message)
    print(f"controller: {resp.controller_id}")
    print(json.dumps(json.loads(resp.state), indent=2, sort_keys=True))
