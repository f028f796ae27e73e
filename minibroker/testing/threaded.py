"""A Cluster running on its own event loop in a background thread, with a synchronous API.

For test suites of clients that are not asyncio (kafka-python, confluent-kafka, a JVM client
via subprocess): `with ThreadedCluster(brokers=3) as c: use(c.bootstrap)`.
"""
from __future__ import annotations

import asyncio
from typing import Any

from minibroker.cluster import Cluster
from minibroker.loop_thread import LoopThread


class ThreadedCluster(LoopThread):
    def __init__(self, brokers: int = 3, start_timeout: float = 30.0, **config: Any) -> None:
        super().__init__("minibroker", start_timeout)
        self._kw = dict(brokers=brokers, **config)
        self.cluster: Cluster | None = None

    async def _start(self) -> None:
        self.cluster = Cluster(**self._kw)
        await self.cluster.start()

    async def _stop(self) -> None:
        await self.cluster.stop()

    @property
    def violations(self) -> list[dict]:
        """Cluster(strict=True)'s record of protocol rules clients broke (broker/strict.py)."""
        return self.cluster.violations

    def call(self, fn, *args, timeout: float = 60.0, **kw) -> Any:
        """Run cluster coroutine fn(*args) on the cluster's loop and return its result."""
        fut = asyncio.run_coroutine_threadsafe(fn(*args, **kw), self._loop)
        return fut.result(timeout)

    # The control API, synchronously.
    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    @property
    def ca_file(self) -> str | None:
        """The CA certificate clients trust (a TLS listener's; security_config's tls_dir/ca.pem)."""
        return self.cluster.config.ssl_truststore_location or None

    def bootstrap_for(self, listener: str) -> str:
        """The brokers' addresses on one listener (Cluster.bootstrap_for)."""
        return self.cluster.bootstrap_for(listener)

    @property
    def controller_id(self) -> int:
        """The broker hosting the active controller (-1: none)."""
        return self.cluster.controller_node_id

    def stop_broker(self, broker_id: int) -> None:
        self.call(self.cluster.stop_broker, broker_id)

    def start_broker(self, broker_id: int) -> None:
        self.call(self.cluster.start_broker, broker_id)

    def restart_broker(self, broker_id: int) -> None:
        self.call(self.cluster.restart_broker, broker_id)

    # Faults on demand (Cluster's and Faults' control API, see there), run on the cluster's loop.
    def partition_network(self, side_a, side_b) -> None:
        self.call(self.cluster.partition_network, side_a, side_b)

    def heal_network(self) -> None:
        self.call(self.cluster.heal_network)

    def isolate_clients(self, broker_id: int) -> None:
        self._on_loop(self.cluster.isolate_clients, broker_id)

    def heal_clients(self, broker_id: int | None = None) -> None:
        self._on_loop(self.cluster.heal_clients, broker_id)

    def failover_controller(self) -> int:
        return self.call(self.cluster.failover_controller)

    def stop_controller(self) -> None:
        self.call(self.cluster.stop_controller)

    def start_controller(self) -> None:
        self.call(self.cluster.start_controller)

    def push_request_errors(self, api_key: int, errors: list, broker_id: int | None = None) -> None:
        self._on_loop(self.cluster.faults.push_request_errors, api_key, errors, broker_id)

    def hold(self, api_key: int, ms: int | None = None, count: int | None = None,
             broker_id: int | None = None) -> None:
        self._on_loop(self.cluster.faults.hold, api_key, ms, count, broker_id)

    def drop(self, api_key: int, count: int | None = None, broker_id: int | None = None) -> None:
        self._on_loop(self.cluster.faults.drop, api_key, count, broker_id)

    def release(self, api_key: int | None = None) -> None:
        self._on_loop(self.cluster.faults.release, api_key)

    def set_latency(self, broker_id: int, ms: int | None) -> None:
        self._on_loop(self.cluster.faults.set_latency, broker_id, ms)

    def lose_update_metadata(self, broker_id: int, count: int | None = None) -> None:
        self._on_loop(self.cluster.faults.lose_update_metadata, broker_id, count)

    def clear_faults(self) -> None:
        self.call(self.cluster.clear_faults)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     configs: dict[str, str] | None = None) -> None:
        self.call(self.cluster.create_topic, name, partitions, replication_factor, configs)

    # What an autoscaling client must survive (Cluster's KIP-878 control API), run on its loop.
    def _on_loop(self, fn, *args, **kw) -> None:
        async def run():
            fn(*args, **kw)
        self.call(run)

    def flush_trace(self) -> None:
        """Write the trace lines gathered so far to the trace file (Cluster(trace=...))."""
        tracer = self.cluster.tracer if self.cluster is not None else None
        if tracer is not None and self._loop is not None and self._loop.is_running():
            self._on_loop(tracer.flush)

    def set_metadata_propagation_delay(self, broker_id: int, delay_ms: int | None) -> None:
        self._on_loop(self.cluster.set_metadata_propagation_delay, broker_id, delay_ms)

    def set_controller_mutation_rate(self, rate: float, client_id: str | None = None) -> None:
        self._on_loop(self.cluster.set_controller_mutation_rate, rate, client_id)

    def fail_create_partitions(self, topic: str, error: Any, times: int = 1,
                               throttle_time_ms: int = 0) -> None:
        self._on_loop(self.cluster.fail_create_partitions, topic, error, times, throttle_time_ms)

    def stall_create_partitions(self, delay_ms: int, times: int = 1) -> None:
        self._on_loop(self.cluster.stall_create_partitions, delay_ms, times)

    def leader_of(self, topic: str, partition: int) -> int:
        return self.call(self.cluster.leader_of, topic, partition)

    def partition_state(self, topic: str, partition: int) -> dict:
        return self.call(self.cluster.partition_state, topic, partition)

