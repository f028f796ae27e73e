"""What every `minibroker` subcommand shares: one-line errors, defaults in --help, and the
argument types that check a value where it is typed (ports, --bootstrap-server lists).

A subcommand module registers itself with `add_..._parser(sub)` (see cli.py) and reports a user
error with `fail("...")`: `minibroker` prints it as one line on stderr and exits 1.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import ssl
from typing import Any, Callable, NoReturn, TypeVar


class CommandError(Exception):
    """A user-facing error: printed as one line, no traceback."""


def fail(message: str) -> NoReturn:
    raise CommandError(message)


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """The module docstring as written, and "(default: ...)" after every flag's help line."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (its default prints the whole usage first). Subparsers
    inherit the class, so every subcommand gets it."""

    def __init__(self, *args, **kw) -> None:
        kw.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kw)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {text!r}: not a number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {value}: ports are 0-65535")
    return value


def split_servers(text: str) -> list[tuple[str, int]]:
    """"h1:p1,h2:p2" -> [(h1, p1), (h2, p2)]; ValueError naming the bad entry."""
    out = []
    for entry in text.split(","):
        host, sep, p = entry.strip().rpartition(":")
        host = host.strip("[]")                        # [::1]:9092
        if not sep or not host or not p.isdigit() or not 0 < int(p) <= 65535:
            raise ValueError(f"invalid server {entry.strip()!r} in {text!r}: expected HOST:PORT "
                             "(e.g. 127.0.0.1:9092), several separated by commas")
        out.append((host, int(p)))
    return out


def bootstrap_servers(text: str) -> str:
    """argparse type of --bootstrap-server: checked here, passed on as the text."""
    try:
        split_servers(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text.strip()


def bootstrap_parser(sub, name: str, doc: str, help: str) -> argparse.ArgumentParser:
    """The subcommand `name` with kafka-*.sh's --bootstrap-server flag."""
    p = sub.add_parser(name, description=doc, help=help)
    p.add_argument("--bootstrap-server", required=True, type=bootstrap_servers,
                   metavar="HOST:PORT[,HOST:PORT...]", help="brokers to talk to")
    refuse(p, "--zookeeper", "minibroker, like Kafka 4, has no ZooKeeper: use "
           "--bootstrap-server HOST:PORT")
    return p


def one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text or type(e).__name__


def os_reason(e: OSError) -> str:
    """"connection refused", "address already in use", "name or service not known"."""
    if isinstance(e, socket.gaierror) or not e.errno or e.errno < 0:
        return (e.strerror or one_line(e)).lower()
    return os.strerror(e.errno).lower()


async def connect_any(servers: str, client_id: str, timeout: float = 10.0):
    """A connection to the first of `servers` that accepts one and answers, each tried in turn."""
    return await probe(servers, client_id, int(timeout * 1000))


# ---------------------------------------------------------------- client settings and timeouts
# Client properties the tools act on; the rest of a Kafka client's settings are accepted and
# ignored (they tune a Java client), except security ones the reference client cannot honour.
_TIMEOUT_KEYS = ("default.api.timeout.ms", "request.timeout.ms")


def positive_ms(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid milliseconds {text!r}: not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"invalid milliseconds {value}: must be above 0")
    return value


def add_client_flags(p: argparse.ArgumentParser) -> None:
    """--command-config and --timeout-ms, as every Kafka admin tool takes them."""
    p.add_argument("--command-config", metavar="FILE",
                   help="Java-properties file of client settings (request.timeout.ms, "
                        "default.api.timeout.ms, client.id; security.protocol, ssl.* and "
                        "sasl.* as Kafka's clients name them, PEM files)")
    p.add_argument("--timeout-ms", type=positive_ms, default=None, metavar="MS",
                   help="how long to wait to connect and for each answer (default: "
                        "--command-config's request.timeout.ms, else 30000)")


def read_properties(path: str, flag: str = "--command-config") -> dict[str, str]:
    """A Java .properties file: key=value or key: value, # and ! comments, \\ continuations."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        fail(f"cannot read {flag} {path}: {os_reason(e)}")
    out: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line, "") if cut < 0 else (line[:cut], line[cut + 1:])
        out[key.strip()] = value.strip()
    return out


def client_settings(args: argparse.Namespace) -> dict[str, str]:
    """--command-config's properties (checked), and "timeout.ms": the wait, in ms, for connect
    and for each request: --timeout-ms, else the file's request.timeout.ms /
    default.api.timeout.ms, else 30000. Sets `args.security` (minibroker.client.security) from
    the file's security.protocol, ssl.* and sasl.* properties."""
    from minibroker.client.security import SecurityConfigError, from_properties
    path = getattr(args, "command_config", None)
    props = read_properties(path) if path else {}
    try:
        args.client_props = dict(props)
        args.security = from_properties(props)
        args.security.ssl_context()             # certificate files load, or one clear error now
    except SecurityConfigError as e:
        fail(f"{path}: {e}")
    timeout = getattr(args, "timeout_ms", None)
    if timeout is None:
        for key in _TIMEOUT_KEYS:
            if key in props:
                try:
                    timeout = positive_ms(props[key])
                except argparse.ArgumentTypeError as e:
                    fail(f"{key} in {path}: {e}")
                break
    props["timeout.ms"] = str(timeout or 30000)
    return props


def security_with(args: argparse.Namespace, conf: dict[str, str], flag: str):
    """args.security, unless a tool's own client properties (--producer.config, ...) set the
    security.protocol, ssl.* or sasl.* keys: then those over --command-config's."""
    from minibroker.client.security import SecurityConfigError, from_properties
    if not any(k.startswith(("security.", "ssl.", "sasl.")) for k in conf):
        return args.security
    try:
        sec = from_properties({**args.client_props, **conf})
        sec.ssl_context()
        return sec
    except SecurityConfigError as e:
        fail(f"{flag}: {e}")


async def probe(servers: str, client_id: str, timeout_ms: int, security=None):
    """A connection to the first bootstrap server that accepts one *and* answers ApiVersions
    (and authenticates, with SASL) within `timeout_ms`; one sentence naming each server and
    what it did otherwise."""
    from kafka.protocol.metadata import ApiVersionsRequest
    from minibroker.network.client import KafkaClientConnection
    from minibroker.network.sasl_client import AuthenticationFailed
    timeout = timeout_ms / 1000
    tls = security.ssl_context() if security is not None else None
    tried = []
    accepted = False            # some server took the connection
    for host, p in split_servers(servers):
        try:
            conn = await asyncio.wait_for(
                KafkaClientConnection.connect(host, p, client_id=client_id, ssl=tls), timeout)
        except asyncio.TimeoutError:    # first: TimeoutError is an OSError too
            tried.append(f"{host}:{p} (no connection in {timeout_ms} ms)")
            continue
        except ssl.SSLError as e:
            tried.append(f"{host}:{p} (TLS handshake failed: {e.reason or one_line(e)})")
            continue
        except OSError as e:
            tried.append(f"{host}:{p} ({os_reason(e)})")
            continue
        try:
            await conn.request(ApiVersionsRequest(), 0, timeout=timeout)
            if security is not None:
                await asyncio.wait_for(security.authenticate(conn), timeout)
            return conn
        except asyncio.TimeoutError:
            tried.append(f"{host}:{p} (accepted the connection but did not answer ApiVersions "
                         f"in {timeout_ms} ms)")
        except AuthenticationFailed as e:
            tried.append(f"{host}:{p} (authentication failed: {one_line(e)})")
        except (ConnectionError, OSError):
            tried.append(f"{host}:{p} (closed the connection without answering ApiVersions)")
        accepted = True
        conn.close()
    what = "no bootstrap server answered" if accepted else \
        "cannot connect to any bootstrap server"
    fail(f"{what}: {', '.join(tried)}")


def broker_reason(err: Exception) -> str:
    """A Kafka error from the reference admin client as the broker worded it, without the
    client's "alter configs t: " prefix and Python's class name."""
    text = str(err.args[0]) if err.args else getattr(err, "description", "") or str(err)
    return text.split(": ", 1)[1] if ": " in text else text


def user_message(e: BaseException) -> str:
    """One sentence for an error no tool caught: Kafka's error name and what it means, the
    operating system's reason, or the message, without Python's exception class names."""
    from kafka.errors import KafkaError
    if isinstance(e, asyncio.TimeoutError):
        return one_line(e) if str(e) else "no answer in time (--timeout-ms)"
    if isinstance(e, KafkaError):
        name = getattr(type(e), "message", "") or type(e).__name__
        detail = one_line(e) if e.args else getattr(type(e), "description", "")
        return f"{name}: {detail}" if detail and detail != name else name
    if isinstance(e, OSError) and e.errno:
        where = f" {e.filename}" if e.filename else ""
        return f"{os_reason(e)}{where}"
    if isinstance(e, ConnectionError):
        return f"the connection closed: {one_line(e)}"
    return one_line(e)


class _Refused(argparse.Action):
    """A Kafka flag that cannot apply here: giving it is one line saying why."""

    def __call__(self, parser, namespace, values, option_string=None):
        raise argparse.ArgumentError(self, self.help)


def refuse(p: argparse.ArgumentParser, flag: str, why: str, takes_value: bool = True) -> None:
    """Register Kafka's `flag` on `p` as refused, `why` being the one-line reason (also shown in
    --help and in docs/cli.md)."""
    p.add_argument(flag, action=_Refused, nargs=None if takes_value else 0, help=why)


def refuse_command(cmd, name: str, why: str, *flags: str,
                   switches: tuple[str, ...] = ()) -> None:
    """Register Kafka's subcommand `name` (of the subparsers `cmd`) as refused: running it, or
    giving one of its `flags` (valued) or `switches`, is one line saying `why` (docs/cli.md too)."""
    p = cmd.add_parser(name, help=f"refused: {why}")
    p.set_defaults(refused=why)
    for flag in flags:
        refuse(p, flag, why)
    for flag in switches:
        refuse(p, flag, why, takes_value=False)


def check_refused(args: argparse.Namespace) -> None:
    """A refused subcommand (refuse_command) fails here, before any connection."""
    why = getattr(args, "refused", None)
    if why:
        fail(why)


def refuse_bootstrap_controller(p: argparse.ArgumentParser, more: str = "") -> None:
    """Kafka's --bootstrap-controller (KIP-919), refused: the controllers have no listener."""
    refuse(p, "--bootstrap-controller", "minibroker's controllers run inside the brokers and "
           "are reached through them: use --bootstrap-server" + more)


def add_switches(p: Any, *switches: tuple[str, str]) -> None:
    """Register each (flag, help) on `p` (a parser or an argument group) as a store_true switch."""
    for flag, help in switches:
        p.add_argument(flag, action="store_true", help=help)


T = TypeVar("T")


def read_json_file(path: str, shape: str, parse: Callable[[Any], T]) -> T:
    """`parse` of the JSON document in the file at `path`; a file that cannot be read, is not
    JSON, or that `parse` finds no `shape` (an example of the document) in, is one line (fail)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return parse(doc)
    except OSError as e:
        fail(f"cannot read {path}: {os_reason(e)}")
    except json.JSONDecodeError as e:
        fail(f"{path} is not JSON: {e.msg} at line {e.lineno} column {e.colno}")
    except (KeyError, TypeError, ValueError) as e:
        what = f"no {e.args[0]!r} field" if isinstance(e, KeyError) else one_line(e)
        fail(f"{path} is not {shape}: {what}")
