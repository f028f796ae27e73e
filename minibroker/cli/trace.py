"""`minibroker trace FILE` — a `serve --trace FILE` protocol trace as a readable timeline.

    minibroker trace trace.jsonl
    minibroker trace trace.jsonl --api Produce --api Fetch
    minibroker trace trace.jsonl --client rdkafka --topic orders --error
    minibroker trace trace.jsonl --error NOT_LEADER_OR_FOLLOWER --fields

One line per request (→), response (←) or closed connection (✕): time, broker, connection,
client, API and version, correlation id, then what matters for that API (record batches for
Produce and Fetch, error names, latency, throttle). --fields adds each line's decoded fields.
Filters combine (all must match); a response is shown when its request is.
"""
from __future__ import annotations

import json
import sys
from typing import Any, Iterator

from minibroker.broker.timeline import timeline_line
from minibroker.cli.common import fail


def records(path: str) -> Iterator[dict]:
    try:
        stream = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}")
    with stream:
        for n, line in enumerate(stream, 1):
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except ValueError:
                fail(f"{path}:{n}: not a trace line (JSON expected)")


def topics_of(fields: Any) -> set[str]:
    """Topic names anywhere in decoded fields (fields called name/topic/topic_name inside a
    topics-like array, or a top-level `topics` list of strings)."""
    out: set[str] = set()

    def walk(v: Any, parent: str) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if k in ("name", "topic", "topic_name") and isinstance(x, str) and "topic" in parent:
                    out.add(x)
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, str) and "topic" in parent:
                    out.add(x)
                walk(x, parent)
    walk(fields, "")
    return out


def _matches(r: dict, args) -> bool:
    if args.api and str(r.get("api")) not in args.api and str(r.get("api_key")) not in args.api:
        return False
    if args.client:
        who = f"{r.get('client_id') or ''} {r.get('software') or ''}"
        if not any(c in who for c in args.client):
            return False
    if args.topic and not set(args.topic) & topics_of(r.get("fields")):
        return False
    if args.error is not None:
        errs = set(r.get("errors") or {})
        if r.get("dir") == "closed":
            errs.add("closed")
        if not errs or (args.error != "" and args.error not in errs):
            return False
    return True


def run_trace(args) -> None:
    # A response/close belongs to its request: keyed by (broker, conn, corr), shown with it.
    shown: set[tuple] = set()
    pending: dict[tuple, dict] = {}     # --error: requests waiting for their response
    for r in records(args.file):
        key = (r.get("broker"), r.get("conn"), r.get("corr"))
        if r.get("dir") == "request":
            ok = _matches(r, args) if args.error is None else _matches(r, _no_error(args))
            if ok and args.error is None:
                shown.add(key)
                print(timeline_line(r, args.fields))
            elif ok:
                shown.add(key)          # printed with its failing response below
                pending[key] = r
            continue
        if args.error is not None:
            if key in shown and _matches(r, _only_error(args)):
                if key in pending:
                    print(timeline_line(pending.pop(key), args.fields))
                print(timeline_line(r, args.fields))
            pending.pop(key, None)
        elif key in shown or (not args.topic and _matches(r, args)):
            print(timeline_line(r, args.fields))
        shown.discard(key)


class _View:
    def __init__(self, args, **changes) -> None:
        self.__dict__.update(vars(args), **changes)


def _no_error(args):
    return _View(args, error=None)


def _only_error(args):
    return _View(args, api=None, client=None, topic=None)


def add_trace_parser(sub) -> None:
    p = sub.add_parser("trace", help="print a `serve --trace` file as a timeline",
                       description=__doc__)
    p.add_argument("file", help="the trace (JSON lines; - for stdin)")
    p.add_argument("--api", action="append", help="only this API (name or key; repeat)")
    p.add_argument("--client", action="append",
                   help="only clients whose client_id or software name contains this (repeat)")
    p.add_argument("--topic", action="append", help="only requests naming this topic (repeat)")
    p.add_argument("--error", nargs="?", const="", default=None, metavar="NAME",
                   help="only exchanges answered with an error (this one, e.g. "
                        "NOT_LEADER_OR_FOLLOWER or closed), with their requests")
    p.add_argument("--fields", action="store_true", help="print each line's decoded fields")
    p.set_defaults(func=run_trace)
