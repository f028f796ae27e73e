"""The Kafka source's options (Spark's names), parsed once into a plain picklable object.

Option names are case-insensitive as in Spark.  Offsets are Kafka-style JSON, Spark's format:
`{"topic": {"0": 23, "1": -2}}` (-2 earliest, -1 latest); timestamps the same shape in ms.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from minibroker.client import TopicPartition
from minibroker.spark import option_table
from minibroker.spark.security import ClientConf, client_conf

EARLIEST, LATEST = -2, -1

_FALSE = {"false", "0", "no", "off"}


def _bool(v: str | None, default: bool) -> bool:
    return default if v is None else str(v).strip().lower() not in _FALSE


def _int(v: str | None) -> int | None:
    return None if v in (None, "") else int(v)


def _duration_ms(v: str | None, default_ms: int) -> int:
    """Spark's time strings: '15m', '30s', '500ms', '1h', or plain milliseconds."""
    if v in (None, ""):
        return default_ms
    s = str(v).strip().lower()
    for unit, mult in (("ms", 1), ("s", 1000), ("m", 60000), ("min", 60000), ("h", 3600000)):
        if s.endswith(unit) and s[:-len(unit)].strip().replace(".", "", 1).isdigit():
            return int(float(s[:-len(unit)]) * mult)
    return int(s)


def parse_offsets_json(text: str, what: str) -> dict[TopicPartition, int]:
    try:
        raw = json.loads(text)
        return {TopicPartition(t, int(p)): int(o) for t, ps in raw.items() for p, o in ps.items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise ValueError(f"{what}: expected JSON like {{\"topic\": {{\"0\": 23}}}}, got {text!r}") from e


def to_json_offsets(offsets: dict[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json_offsets(d: dict) -> dict[TopicPartition, int]:
    """The offsets of Kafka-style JSON; '@' keys (minibroker.spark.lineage) are not topics."""
    return {TopicPartition(t, int(p)): int(o) for t, ps in (d or {}).items()
            if not t.startswith("@") for p, o in ps.items()}


@dataclass
class Spec:
    """Where a read starts or ends: 'earliest' / 'latest', per-partition offsets or timestamps."""
    kind: str                                        # earliest | latest | offsets | timestamps | timestamp
    offsets: dict[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None
    strategy: str = "error"                          # no offset at/after the timestamp: error | latest


@dataclass
class SourceOptions:
    bootstrap: str
    subscribe: list[str] | None
    pattern: str | None
    assign: dict[str, list[int]] | None
    starting: Spec
    ending: Spec
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    fail_on_data_loss: bool
    include_headers: bool
    ordered_delivery: bool
    min_partitions: int | None
    max_records_per_partition: int
    fetch_max_bytes: int
    client: ClientConf = None               # how to connect (security, timeouts)


def _spec(opts: dict, prefix: str, default: str) -> Spec:
    strategy = (opts.get(f"{prefix}offsetsbytimestampstrategy") or "error").lower()
    if strategy not in ("error", "latest"):
        raise ValueError(f"{prefix}OffsetsByTimestampStrategy must be 'error' or 'latest'")
    if opts.get(f"{prefix}timestamp") not in (None, ""):
        return Spec("timestamp", timestamp=int(opts[f"{prefix}timestamp"]), strategy=strategy)
    if opts.get(f"{prefix}offsetsbytimestamp") not in (None, ""):
        return Spec("timestamps", parse_offsets_json(opts[f"{prefix}offsetsbytimestamp"],
                                                     f"{prefix}OffsetsByTimestamp"), strategy=strategy)
    v = (opts.get(f"{prefix}offsets") or default).strip()
    if v.lower() in ("earliest", "latest"):
        return Spec(v.lower())
    return Spec("offsets", parse_offsets_json(v, f"{prefix}Offsets"))


def parse(options, streaming: bool) -> SourceOptions:
    opts = {str(k).lower(): (None if v is None else str(v)) for k, v in dict(options).items()}
    option_table.check(opts, "source")
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise ValueError("option 'kafka.bootstrap.servers' is required")
    client = client_conf(opts, "minibroker-spark")
    given = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(given) != 1:
        raise ValueError("exactly one of 'subscribe', 'subscribePattern' or 'assign' must be given")
    subscribe = pattern = assign = None
    if given[0] == "subscribe":
        subscribe = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
    elif given[0] == "subscribepattern":
        pattern = opts["subscribepattern"]
    else:
        try:
            assign = {t: [int(p) for p in ps] for t, ps in json.loads(opts["assign"]).items()}
        except (ValueError, AttributeError, TypeError) as e:
            raise ValueError(f"assign: expected JSON like {{\"topic\": [0, 1]}}") from e
    starting = _spec(opts, "starting", "latest" if streaming else "earliest")
    ending = _spec(opts, "ending", "latest")
    if streaming and any(opts.get(k) for k in ("endingoffsets", "endingoffsetsbytimestamp", "endingtimestamp")):
        raise ValueError("ending offsets are for batch queries only (as Spark's Kafka source)")
    if not streaming and starting.kind == "latest":
        raise ValueError("startingOffsets='latest' is for streaming queries only")
    if not streaming and ending.kind == "earliest":
        raise ValueError("endingOffsets='earliest' is not allowed in batch queries")
    mx = _int(opts.get("maxoffsetspertrigger"))
    mn = _int(opts.get("minoffsetspertrigger"))
    if mx is not None and mx < 1 or mn is not None and mn < 1 or mx and mn and mn > mx:
        raise ValueError("maxOffsetsPerTrigger/minOffsetsPerTrigger must be positive and min <= max")
    return SourceOptions(
        bootstrap=bootstrap, subscribe=subscribe, pattern=pattern, assign=assign,
        starting=starting, ending=ending, max_offsets_per_trigger=mx, min_offsets_per_trigger=mn,
        max_trigger_delay_ms=_duration_ms(opts.get("maxtriggerdelay"), 15 * 60 * 1000),
        fail_on_data_loss=_bool(opts.get("failondataloss"), True),
        include_headers=_bool(opts.get("includeheaders"), False),
        ordered_delivery=_bool(opts.get("ordereddelivery"), True),
        min_partitions=_int(opts.get("minpartitions")),
        max_records_per_partition=_int(opts.get("maxrecordsperpartition")) or 500_000,
        fetch_max_bytes=_int(opts.get("kafka.fetch.max.bytes")) or (8 << 20),
        client=client,
    )
