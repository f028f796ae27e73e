#!/usr/bin/env python3
"""Admin calls across controller failovers, with real clients: rounds, successes, seconds.

    python benchmarks/controller_failover.py [--rounds 10] [--brokers 3]

Each round runs a fresh in-process ThreadedCluster, stops broker 1 (which hosts the first active
controller), then the broker that hosts the next one, and after each stop has kafka-python's
KafkaAdminClient and librdkafka's AdminClient (confluent-kafka), each a new client bootstrapped
with every broker, create a topic and add partitions to it. Prints, per client and stop, how many
rounds succeeded, whether Metadata named a live controller, and the median seconds of the two
calls. Issue 25 measured 0 of 10 CreateTopics with broker 1 stopped before the controller moved.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from minibroker.testing import ThreadedCluster  # noqa: E402


def kafka_python(bs: str, topic: str, rf: int) -> int:
    from kafka.admin import KafkaAdminClient, NewPartitions, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=10000,
                             reconnect_backoff_max_ms=500)
    try:
        admin.create_topics([NewTopic(topic, 1, rf)], timeout_ms=10000)
        admin.create_partitions({topic: NewPartitions(3)}, timeout_ms=10000)
        return admin._manager.run(admin._get_cluster_metadata, [])["controller_id"]
    finally:
        admin.close()


def confluent(bs: str, topic: str, rf: int) -> int:
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
    admin = AdminClient({"bootstrap.servers": bs, "reconnect.backoff.max.ms": 500,
                         "log_level": 0})
    for f in admin.create_topics([NewTopic(topic, 1, rf)], request_timeout=10).values():
        f.result(15)
    for f in admin.create_partitions([NewPartitions(topic, 3)], request_timeout=10).values():
        f.result(15)
    return admin.list_topics(timeout=10).controller_id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--brokers", type=int, default=3)
    args = ap.parse_args()
    clients = {"kafka-python": kafka_python, "librdkafka": confluent}
    stats = {(c, s): [0, 0, []] for c in clients for s in ("broker 1", "controller host")}
    for r in range(args.rounds):
        with ThreadedCluster(brokers=args.brokers) as tc:
            bs, live = tc.bootstrap, set(range(1, args.brokers + 1))
            for stop in ("broker 1", "controller host"):
                host = 1 if stop == "broker 1" else tc.controller_id
                tc.stop_broker(host)
                live.discard(host)
                for name, call in clients.items():
                    st = stats[(name, stop)]
                    t0 = time.monotonic()
                    try:
                        controller = call(bs, f"r{r}-{name}-{host}", 1)
                    except Exception as e:  # noqa: BLE001 - counted and shown
                        print(f"round {r} {name} with {stop} stopped: {e!r}", file=sys.stderr)
                        continue
                    st[0] += 1
                    st[1] += controller in live
                    st[2].append(time.monotonic() - t0)
    for (name, stop), (ok, named, secs) in stats.items():
        med = f"{statistics.median(secs):.2f}" if secs else "-"
        print(f"{name:13s} {stop:16s} CreateTopics+CreatePartitions {ok}/{args.rounds} "
              f"live controller in Metadata {named}/{args.rounds}  median {med} s")


if __name__ == "__main__":
    main()
