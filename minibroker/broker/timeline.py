"""A protocol trace line (broker/trace.py) as one readable timeline entry: `minibroker trace` and
the pytest plugin's failure report print them. Plain functions of the JSON; nothing of the broker
is loaded."""
from __future__ import annotations

import datetime
import json
from typing import Any


def batch_text(fields: Any) -> list[str]:
    """"t[0] @0 n=10 pid=1000 e=0 seq=0 lz4 1.2KiB" per record batch, in topic order."""
    out: list[str] = []
    if not isinstance(fields, dict):
        return out
    for t in fields.get("topic_data") or fields.get("responses") or fields.get("topics") or []:
        if not isinstance(t, dict):
            continue
        name = t.get("name") or t.get("topic") or t.get("topic_id")
        for p in t.get("partition_data") or t.get("partitions") or []:
            idx = p.get("index", p.get("partition_index", p.get("partition")))
            for b in p.get("records") or []:
                if "count" in b:
                    out.append(f"{name}[{idx}] @{b['base_offset']} n={b['count']} "
                               f"pid={b['producer_id']} e={b['producer_epoch']} "
                               f"seq={b['base_sequence']} {b['codec']}"
                               + (" txn" if b.get("transactional") else "")
                               + (" control" if b.get("control") else "") + f" {b['size']}B")
    return out


def timeline_line(r: dict[str, Any], show_fields: bool) -> str:
    when = datetime.datetime.fromtimestamp(r["time"] / 1000, datetime.timezone.utc)
    arrow = {"request": "→", "response": "←", "closed": "✕"}.get(r.get("dir", ""), "?")
    who = r.get("client_id") or "-"
    if r.get("software"):
        who += f" ({r['software']})"
    head = (f"{when:%H:%M:%S}.{when.microsecond // 1000:03d} b{r.get('broker')} "
            f"c{r.get('conn')} {arrow} {r.get('api', '?')} v{r.get('version', '?')} "
            f"#{r.get('corr', '?')} {who}")
    extra: list[str] = []
    if r.get("dir") == "response":
        extra.append(f"{r.get('latency_ms', 0)}ms")
        if r.get("throttle_ms"):
            extra.append(f"throttle={r['throttle_ms']}ms")
        if r.get("errors"):
            extra.append("errors=" + ",".join(r["errors"]))
        if r.get("no_response"):
            extra.append("(no response: acks=0)")
    if r.get("dir") == "closed":
        extra.append(f"closed: {r.get('reason')}")
    for v in r.get("violations") or []:
        extra.append(f"VIOLATION {v.get('rule')}")
    lines = [" ".join([head] + extra)]
    lines += [f"    {b}" for b in batch_text(r.get("fields"))]
    if show_fields and "fields" in r:
        lines.append("    " + json.dumps(r["fields"], separators=(",", ":")))
    return "\n".join(lines)
