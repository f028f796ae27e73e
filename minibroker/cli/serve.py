"""`minibroker serve`: run a cluster until SIGTERM/SIGINT, its flags, and --override's configs."""
from __future__ import annotations

import argparse
import asyncio
import gc
import ipaddress
import signal
import sys

from minibroker.cli.common import fail, one_line, os_reason, port
from minibroker.cli.serve_security import (
    add_security_flags, ca_line, inter_broker_overrides, security_overrides)
from minibroker.config import ClusterConfig, emulated_releases

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _overrides(pairs: list[str]) -> dict:
    """--override NAME=VALUE pairs -> ClusterConfig fields; unknown names are refused, as Kafka
    refuses an unknown broker config in AlterConfigs."""
    from minibroker.log.config import BROKER_CONFIGS
    names = ClusterConfig.kafka_names()
    out: dict = {}
    extra: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            fail(f"--override expects NAME=VALUE, got {pair!r}")
        field = names.get(key)
        if field is None:
            if key not in BROKER_CONFIGS:
                fail(f"Unknown broker config {key} (the known ones: minibroker serve --help)")
            extra[key] = value
            continue
        default = getattr(ClusterConfig, field)
        if isinstance(default, bool):
            if value.lower() not in ("true", "false"):
                fail(f"Invalid value {value} for configuration {key}: "
                     "Expected value to be either true or false")
            out[field] = value.lower() == "true"
            continue
        try:
            out[field] = type(default)(value)
        except ValueError:
            fail(f"Invalid value {value} for configuration {key}: Not a number")
    if extra:
        out["extra"] = extra
    return out


def _config(args) -> ClusterConfig:
    """The serve flags as a ClusterConfig, every mistake reported in the flag's own words."""
    if args.brokers < 1:
        fail(f"--brokers must be at least 1, got {args.brokers}")
    racks = tuple(args.rack or ())
    if len(racks) > args.brokers:
        fail(f"{len(racks)} --rack values for {args.brokers} brokers (at most one per broker)")
    if args.port and args.port + args.brokers - 1 > 65535:
        fail(f"--port {args.port} leaves no room for {args.brokers} brokers (ports end at 65535)")
    # The security shortcuts first: a config --override names explicitly wins.
    overrides = {**security_overrides(args), **_overrides(args.override)}
    if args.controller_quorum_voters:
        try:
            overrides["controller_quorum_voters"] = tuple(
                int(v) for v in args.controller_quorum_voters.split(","))
        except ValueError:
            fail(f"--controller-quorum-voters expects broker ids like 1,2,3, got "
                 f"{args.controller_quorum_voters!r}")
    if "log_memory_max_bytes" not in overrides:
        # serve's own default (the library's is -1, no cap): sized from the machine, so the
        # README's command reuses deleted batches' memory instead of faulting in every new GiB.
        from minibroker.log.memory import default_max_bytes
        overrides["log_memory_max_bytes"] = default_max_bytes(args.brokers)
    try:
        config = ClusterConfig(brokers=args.brokers, host=args.host, port=args.port, racks=racks,
                               seed=args.seed, data_dir=args.data_dir,
                               kafka_version=args.kafka_version, trace=args.trace,
                               strict=args.strict, **overrides)
        if args.processes and args.brokers > 1:
            config = config.with_overrides(**inter_broker_overrides(config))
    except ValueError as e:
        fail(one_line(e))
    return config


def _host(text: str) -> str:
    # A dotted number that is no IPv4 address would be looked up in DNS and fail late.
    if text.replace(".", "").isdigit():
        try:
            ipaddress.ip_address(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid host {text!r}: not an IPv4 address") \
                from None
    return text


def _cluster_or_supervisor(args, config: ClusterConfig):
    """(cluster, None), or with --processes (None, the supervisor of the broker processes: this
    process then loads no broker, so the children's start-up has the cores to itself)."""
    try:
        if args.processes and config.brokers > 1:
            if args.faults:
                fail("--faults works in one process only: drop --processes")
            from minibroker.processes import Supervisor, cluster_id_for
            return None, Supervisor(config, cluster_id_for(config), restart=not args.no_restart,
                                    metrics_port=args.metrics_port)
        # Imported here for start-up: `minibroker topics ...` and --help never load the broker.
        from minibroker.cluster import Cluster
        cluster = Cluster(config)
    except ValueError as e:                  # a log.* override's value (Kafka's wording)
        fail(one_line(e))
    if args.faults:
        cluster.enable_fault_admin()
    return cluster, None


async def _serve(args, config: ClusterConfig) -> None:
    from minibroker.log.memory import keep_freed_batches_for_reuse
    keep_freed_batches_for_reuse(config.minibroker_log_heap_huge_pages)
    cluster, children = _cluster_or_supervisor(args, config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        if children is None:
            await cluster.start()
        else:
            await children.start()
    except OSError as e:                     # port in use, address not ours, unknown host
        ports = (f"{config.port}-{config.port + config.brokers - 1}"
                 if config.port and config.brokers > 1 else str(config.port))
        fail(f"cannot listen on {config.host} port {ports}: {os_reason(e)}")
    except (RuntimeError, asyncio.TimeoutError) as e:     # a broker process did not come up
        await children.stop()
        fail(f"serve --processes: {one_line(e) or 'a broker process did not register in time'}")
    metrics = None
    if args.metrics_port is not None and children is None:
        from minibroker.metrics import MetricsServer
        try:
            metrics = await MetricsServer(cluster).start(config.host, args.metrics_port)
        except OSError as e:
            await cluster.stop()
            fail(f"cannot serve metrics on {config.host} port {args.metrics_port}: "
                 f"{os_reason(e)}")
    bootstrap = cluster.bootstrap if children is None else children.bootstrap()
    console = None
    if args.console_port is not None:
        from minibroker.console.server import ConsoleServer
        try:
            console = await ConsoleServer(bootstrap, config.host, args.console_port).start()
        except OSError as e:
            await (cluster.stop() if children is None else children.stop())
            fail(f"cannot serve the console on {config.host} port {args.console_port}: "
                 f"{os_reason(e)}")
    # Everything allocated so far (modules, kafka-python's schemas: ~45,000 objects) lives as long
    # as the process: out of the collector's sight, a full collection scans only what the brokers
    # hold, and no longer stalls every broker for 10-35 ms once produced batches trigger one.
    gc.collect()
    gc.freeze()
    print(f"BOOTSTRAP {bootstrap}", flush=True)
    if metrics is not None:
        print(f"METRICS http://{config.host}:{metrics.port}/metrics", flush=True)
    for _, port in sorted(children.metrics_ports.items()) if children is not None else ():
        print(f"METRICS http://{config.host}:{port}/metrics", flush=True)     # one per broker
    if console is not None:
        print(f"CONSOLE {console.url}", flush=True)
    if ca_line(args) is not None:
        print(ca_line(args), flush=True)
    names = ([spec.name for spec in cluster.brokers[1].listeners] if children is None
             else children.client_listeners())  # not the brokers' own (--processes)
    for name in names if len(names) > 1 else ():    # each listener's bootstrap
        print(f"LISTENER {name} {(children or cluster).bootstrap_for(name)}", flush=True)
    cap = config.log_memory_max_bytes
    overflow = "" if cap < 0 else (
        " (past it the oldest batches spill to files in a temporary directory, removed at exit)"
        if config.log_memory_overflow == "spill" else
        " (past it the oldest batches are DELETED: log.memory.overflow=delete)")
    cluster_id = cluster.cluster_id if children is None else children.cluster_id
    print(f"minibroker: {config.brokers} brokers, cluster id {cluster_id}, "
          f"log.memory.max.bytes={cap} per broker{overflow}"
          f"{f', data in {config.data_dir}' if config.data_dir else ''}; Ctrl-C to stop",
          file=sys.stderr, flush=True)
    await stop.wait()
    if console is not None:
        await console.stop()
    if metrics is not None:
        await metrics.stop()
    if children is not None:
        await children.stop()
    else:
        await cluster.stop()


def _run(coro) -> None:
    # The import alone is tried: a failure inside the run must not be chained to (or, if it is an
    # ImportError, retried after) "No module named 'uvloop'".
    try:
        import uvloop  # faster event loop when installed
    except ImportError:
        uvloop = None
    if uvloop is None:
        print("minibroker: uvloop is not installed; running on asyncio's own event loop (slower)",
              file=sys.stderr, flush=True)
        asyncio.run(coro)
    else:
        uvloop.run(coro)


def _config_names() -> str:
    from minibroker.log.config import BROKER_CONFIGS
    defaults = ClusterConfig().describe()
    lines = [f"  {name}={defaults[name]}" for name in sorted(defaults)]
    lines += [f"  {name} (a topic default; unset: Kafka's)" for name in sorted(BROKER_CONFIGS)]
    return "broker configs for --override, with their defaults:\n" + "\n".join(lines)


def add_serve_parser(sub, description: str) -> None:
    s = sub.add_parser("serve", help="run a cluster until SIGTERM/SIGINT", description=description,
                       epilog=_config_names())
    s.add_argument("--brokers", type=int, default=3, help="number of brokers")
    s.add_argument("--host", type=_host, default="127.0.0.1", help="address to listen on")
    s.add_argument("--port", type=port, default=9092,
                   help="first broker's port; the others follow (0 = any free ports)")
    s.add_argument("--rack", action="append",
                   help="broker.rack of broker 1, 2, ... (repeat, at most once per broker)")
    s.add_argument("--seed", type=int, default=None,
                   help="repeat a run: ids, cluster id and timestamps follow from it")
    s.add_argument("--override", action="append", default=[], metavar="NAME=VALUE",
                   help="a broker config by its Kafka name, e.g. num.partitions=3 (repeat; "
                        "the names are listed below)")
    s.add_argument("--controller-quorum-voters", default=None, metavar="IDS",
                   help="controller.quorum.voters: the brokers that may host the active "
                        "controller, e.g. 1,2,3 (default: every broker)")
    s.add_argument("--data-dir", default=None, metavar="DIR",
                   help="keep logs, the metadata log (with snapshots) and the internal topics on "
                        "disk under DIR (Kafka's log.dirs; DIR/broker-N per broker) and start "
                        "from what DIR holds; default: in memory only")
    s.add_argument("--kafka-version", default=None, metavar="X.Y",
                   choices=emulated_releases(),
                   help="emulate this Kafka release: ApiVersions advertises what its brokers "
                        "did (2.1 to 4.1; docs/client-authors.md)")
    s.add_argument("--trace", default=None, metavar="FILE",
                   help="write a JSON line per client request and response to FILE (- for "
                        "stderr); `minibroker trace FILE` prints it as a timeline")
    s.add_argument("--strict", action="store_true",
                   help="record each protocol rule a client breaks (serving is unchanged): a "
                        "WARNING line each, and in the --trace lines")
    s.add_argument("--log-level", default="WARNING", type=str.upper, choices=LOG_LEVELS,
                   help="logging level on stderr")
    s.add_argument("--processes", action="store_true",
                   help="one broker per process (uses as many cores), each a voter of the "
                        "metadata quorum; the parent only supervises")
    s.add_argument("--no-restart", action="store_true",
                   help="with --processes: leave a broker process that died down (by default "
                        "it is started again, from --data-dir if given, else as an empty "
                        "replica that catches up)")
    s.add_argument("--faults", action="store_true",
                   help="serve the fault control API (FaultControl, key 1004) that "
                        "`minibroker faults` uses: any client may then stop brokers, cut the "
                        "network, inject errors (see README, Faults on demand)")
    add_security_flags(s)
    s.add_argument("--metrics-port", type=port, default=None,
                   help="serve Prometheus metrics on this port (0 = any free port; needs the "
                        "'metrics' extra, prometheus_client); with --processes each broker "
                        "process serves its own, broker N's on this port + N - 1")
    s.add_argument("--console-port", type=port, default=None,
                   help="serve the web console on this port (0 = any free port; needs the "
                        "'console' extra)")


def run_serve(args) -> None:
    if args.metrics_port is not None:
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            fail("--metrics-port needs prometheus_client: pip install 'minibroker[metrics]'")
    if args.console_port is not None:
        from minibroker.cli.console import require_console_extra
        require_console_extra()
    if args.processes and (args.trace or args.strict):
        fail("--trace and --strict observe the brokers of one process: not with --processes")
    config = _config(args)
    _run(_serve(args, config))
