#!/usr/bin/env python3
"""The protocol trace's cost counted in instructions, which a loaded machine does not move
(trace_cost.py's timings do): N requests of one kind on a warm 1-broker Cluster, trace off or on.

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        python benchmarks/trace_count.py on Fetch 300     # then with 0: the difference / 300

Run each mode with N and with 0 requests; (collected(N) - collected(0)) / N is the instructions
per request (the client's side included, as trace_cost.py's process CPU includes it). Kinds and
requests are trace_cost.py's.
"""
from __future__ import annotations

import asyncio
import functools
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import trace_cost  # noqa: E402

from minibroker.broker.context import context_class  # noqa: E402
from minibroker.broker.dispatch import dispatch  # noqa: E402
from minibroker.cluster import Cluster  # noqa: E402
from minibroker.network.memory import connect  # noqa: E402


async def main(mode: str, kind: str, n: int) -> None:
    fd, path = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    cluster = Cluster(brokers=1, trace=path)
    await cluster.start()
    try:
        await cluster.create_topic("t", 1, 1)
        services = cluster.brokers[1].services
        conn = connect(functools.partial(dispatch, services, context_class(services))
                       if mode == "off" else cluster.brokers[1].handle)
        for _ in range(10):             # ~10 records for Fetch to read back
            await conn.send_encoded(*trace_cost.KINDS["Produce"][:3], flexible=True)
        key, version, body, flexible = trace_cost.KINDS[kind]
        for _ in range(20 + n):         # 20 to warm up, counted in N=0's run too
            await conn.send_encoded(key, version, body, flexible=flexible)
        conn.close("done")
    finally:
        await cluster.stop()
        os.unlink(path)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("off", "on") \
            or sys.argv[2] not in trace_cost.KINDS:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
