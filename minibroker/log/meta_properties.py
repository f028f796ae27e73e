"""Each broker directory's meta.properties (Kafka's): the cluster id a data directory was
formatted with, kept across restarts (serve --data-dir)."""
from __future__ import annotations

import os


def stored_cluster_id(data_dir: str, brokers: int, cluster_id: str) -> str:
    """The cluster id a data directory was formatted with (Kafka's meta.properties in each log
    directory), else `cluster_id`, written there."""
    for i in range(1, brokers + 1):
        path = os.path.join(data_dir, f"broker-{i}", "meta.properties")
        if os.path.exists(path):
            with open(path) as f:
                props = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
            if "cluster.id" in props:
                cluster_id = props["cluster.id"]
                break
    for i in range(1, brokers + 1):
        directory = os.path.join(data_dir, f"broker-{i}")
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "meta.properties"), "w") as f:
            f.write(f"version=1\ncluster.id={cluster_id}\nnode.id={i}\n")
    return cluster_id
