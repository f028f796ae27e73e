#!/usr/bin/env python3
"""`serve --processes` when any one process dies (issue 42, must-show 1): seconds per SIGKILL.

    python benchmarks/processes_failover.py [--rounds 3]

Each round starts `minibroker serve --processes` (3 brokers, min.insync.replicas=2, a topic of 3
partitions with replication factor 3) and kills broker process 1, then 2, then 3, each once the
last one is back in every ISR. Per kill it prints whether the process ran the active controller,
the seconds until a CreateTopics succeeded (each try from a new librdkafka AdminClient bounded
by 1 s, as tests/test_serve_processes_quorum.py does) against the must-show's bound
(controller.quorum.election.timeout.ms + 1 s), and the seconds until the killed broker was back
in every ISR (bound: 30 s). The test checks the outcome; the seconds are measured here only.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from minibroker.config import ClusterConfig  # noqa: E402
from tests.test_serve_processes import _children, _serve, _stop, _wait_isr  # noqa: E402
from tests.test_serve_processes_quorum import (  # noqa: E402
    _admin_call_succeeds, _wait_for_new_process)


def one_round(r: int) -> list[tuple[int, bool, float, float]]:
    serve, bootstrap = _serve()
    out = []
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("t", 3, 3)])["t"].result(30)
        _wait_isr(admin, "t", {1, 2, 3})
        for victim in (1, 2, 3):
            controller = admin.describe_cluster().result(10).controller.id
            pid = _children(serve.pid)[victim]
            start = time.monotonic()
            os.kill(pid, signal.SIGKILL)
            admin_s = _admin_call_succeeds(bootstrap, f"r{r}-after-{victim}")
            _wait_for_new_process(serve.pid, victim, pid)
            _wait_isr(admin, "t", {1, 2, 3})
            out.append((victim, controller == victim, admin_s, time.monotonic() - start))
    finally:
        _stop(serve)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    bound = ClusterConfig().controller_quorum_election_timeout_ms / 1000 + 1
    rows = [row for r in range(args.rounds) for row in one_round(r)]
    print(f"# serve --processes, 3 brokers, {args.rounds} round(s); admin bound {bound:.1f} s "
          "(election timeout + 1 s), ISR bound 30 s")
    print("killed  controller  admin_s  isr_back_s")
    for victim, was_controller, admin_s, isr_s in rows:
        print(f"{victim:>6}  {'yes' if was_controller else 'no':>10}  {admin_s:7.2f}  "
              f"{isr_s:10.2f}")
    for label, picked in (("controller killed", [r for r in rows if r[1]]),
                          ("other broker killed", [r for r in rows if not r[1]])):
        if picked:
            admin = [r[2] for r in picked]
            print(f"{label}: {len(picked)} kills, admin median {statistics.median(admin):.2f} s, "
                  f"max {max(admin):.2f} s ({sum(a <= bound for a in admin)} within the bound); "
                  f"ISR back max {max(r[3] for r in picked):.2f} s")


if __name__ == "__main__":
    main()
