"""Prometheus metrics for a Cluster, under the names Kafka's JMX exporter gives Kafka's MBeans.

    minibroker serve --metrics-port 9308      # then: curl 127.0.0.1:9308/metrics

Every series carries a `broker` label (one process serves several brokers). Counters come from each
broker's plain-integer `BrokerStats` (minibroker.broker.stats), gauges are computed from broker state
at scrape time, in the event loop's thread (the endpoint is served by the cluster's own loop, so it
never reads state another thread is changing):

  kafka_server_brokertopicmetrics_{bytesin,bytesout,messagesin}_total{topic}
  kafka_server_brokertopicmetrics_replication{bytesin,bytesout}_total
  kafka_network_requestmetrics_requests_total{request}, kafka_network_requestmetrics_totaltimems
      (a summary: _count and _sum in ms, per request type)
  kafka_server_replicamanager_{partitioncount,leadercount,underreplicatedpartitions}
  kafka_server_replicamanager_{isrshrinks,isrexpands}_total
  kafka_controller_kafkacontroller_activecontrollercount
  kafka_server_group_coordinator_metrics_group_count{protocol}  (Kafka 3.7+'s new coordinator)
  kafka_consumergroup_current_offset / kafka_consumergroup_lag{consumergroup,topic,partition}
      (kafka_exporter's names: Kafka brokers export no lag; the coordinator of the group reports it)

Needs prometheus_client (the `metrics` extra): only this exporter does, not the brokers' counting;
`serve` imports this module only with --metrics-port.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from minibroker.broker.dispatch import HANDLERS

log = logging.getLogger("minibroker.metrics")


class Brokers(Protocol):
    """What is read: a Cluster, or one broker process of `serve --processes` (processes/node)."""
    brokers: dict[int, Any]             # node id -> Broker

    @property
    def controller(self) -> Any: ...    # the active controller if it runs here, else None

    @property
    def controller_node_id(self) -> int: ...


def _api_names() -> dict[int, str]:
    """Kafka's request names (ApiKeys), ours for our own keys."""
    return {k: h.name for k, h in HANDLERS.items()}


class ClusterCollector:
    """A prometheus_client collector reading a Cluster's brokers."""

    def __init__(self, cluster: Brokers) -> None:
        self.cluster = cluster

    def collect(self):
        names = _api_names()

        def counter(name, doc, labels=()):
            return CounterMetricFamily(name, doc, labels=["broker", *labels])

        def gauge(name, doc, labels=()):
            return GaugeMetricFamily(name, doc, labels=["broker", *labels])

        bt = "kafka_server_brokertopicmetrics_"
        bytes_in = counter(bt + "bytesin", "Bytes appended by producers", ["topic"])
        bytes_out = counter(bt + "bytesout", "Bytes fetched by consumers", ["topic"])
        msgs_in = counter(bt + "messagesin", "Records appended by producers", ["topic"])
        repl_in = counter(bt + "replicationbytesin", "Bytes appended from leaders")
        repl_out = counter(bt + "replicationbytesout", "Bytes fetched by followers")
        requests = counter("kafka_network_requestmetrics_requests", "Requests handled",
                           ["request"])
        total_time = SummaryMetricFamily("kafka_network_requestmetrics_totaltimems",
                                         "Time from request read to response ready, ms",
                                         labels=["broker", "request"])
        rm = "kafka_server_replicamanager_"
        partitions = gauge(rm + "partitioncount", "Replicas hosted")
        leaders = gauge(rm + "leadercount", "Partitions led")
        under = gauge(rm + "underreplicatedpartitions", "Led partitions with ISR < replicas")
        shrinks = counter(rm + "isrshrinks", "ISR shrinks of led partitions")
        expands = counter(rm + "isrexpands", "ISR expansions of led partitions")
        active = gauge("kafka_controller_kafkacontroller_activecontrollercount",
                       "1 on the broker hosting the active controller")
        groups = gauge("kafka_server_group_coordinator_metrics_group_count",
                       "Groups this broker coordinates", ["protocol"])
        current = gauge("kafka_consumergroup_current_offset", "Committed offset",
                        ["consumergroup", "topic", "partition"])
        lag = gauge("kafka_consumergroup_lag", "High watermark - committed offset",
                    ["consumergroup", "topic", "partition"])
        ctl = self.cluster.controller
        for bid in sorted(self.cluster.brokers):
            b = self.cluster.brokers[bid]
            s, label = b.stats, str(bid)
            for topic in sorted(s.topics):
                ts = s.topics[topic]
                bytes_in.add_metric([label, topic], ts.bytes_in)
                bytes_out.add_metric([label, topic], ts.bytes_out)
                msgs_in.add_metric([label, topic], ts.messages_in)
            repl_in.add_metric([label], s.replication_bytes_in)
            repl_out.add_metric([label], s.replication_bytes_out)
            for key in sorted(s.requests):
                count, seconds = s.requests[key]
                name = names.get(key, str(key))
                requests.add_metric([label, name], count)
                total_time.add_metric([label, name], count_value=count, sum_value=seconds * 1000)
            hosted = led = under_replicated = 0
            rmgr = b.replica_manager
            for key in sorted(rmgr.partitions):
                p = rmgr.partitions[key]
                hosted += 1
                if p.is_leader:
                    led += 1
                    under_replicated += len(p.isr) < len(p.replicas)
            partitions.add_metric([label], hosted)
            leaders.add_metric([label], led)
            under.add_metric([label], under_replicated)
            shrinks.add_metric([label], s.isr_shrinks)
            expands.add_metric([label], s.isr_expands)
            active.add_metric([label], int(ctl is not None and b.running
                                           and self.cluster.controller_node_id == bid))
            if b.running:
                self._groups(b, label, groups, current, lag)
        yield from (bytes_in, bytes_out, msgs_in, repl_in, repl_out, requests, total_time,
                    partitions, leaders, under, shrinks, expands, active, groups, current, lag)

    def _groups(self, b, label, groups, current, lag) -> None:
        _, classic = b.groups.classic.list_groups(None, None)
        consumer = b.groups.consumer.list_groups(None, None)
        groups.add_metric([label, "classic"], len(classic))
        groups.add_metric([label, "consumer"], len(consumer))
        for gid in sorted([g[0] for g in classic] + [g[0] for g in consumer]):
            code, found = b.groups.offsets.fetch_offsets(gid, None)
            for topic, parts in found if not code else ():
                for pid, offset, _epoch, _meta, _err in parts:
                    values = [label, gid, topic, str(pid)]
                    current.add_metric(values, offset)
                    hw = self._high_watermark(topic, pid)
                    if hw is not None:
                        lag.add_metric(values, max(hw - offset, 0))

    def _high_watermark(self, topic: str, partition: int) -> int | None:
        """The leader's, else (one broker process of `serve --processes`) a follower's."""
        found = None
        for bid in sorted(self.cluster.brokers):
            p = self.cluster.brokers[bid].replica_manager.get(topic, partition)
            if p is not None and self.cluster.brokers[bid].running:
                if p.is_leader:
                    return p.high_watermark
                found = p.high_watermark if found is None else found
        return found


class MetricsServer:
    """GET /metrics over HTTP/1.1 on the cluster's event loop (one response per connection)."""

    def __init__(self, cluster: Brokers) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ClusterCollector(cluster))
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    def text(self) -> bytes:
        return generate_latest(self.registry)

    async def start(self, host: str, port: int) -> "MetricsServer":
        self._server = await asyncio.start_server(self._serve, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 10)
            while (await asyncio.wait_for(reader.readline(), 10)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.split()
            if len(parts) >= 2 and parts[0] == b"GET" and parts[1].split(b"?")[0] in (
                    b"/metrics", b"/"):
                try:
                    status, body = b"200 OK", self.text()
                except Exception as e:  # noqa: BLE001 — a bug here must not go unanswered
                    log.warning("metrics: collecting failed: %r", e, exc_info=True)
                    status, body = b"500 Internal Server Error", b"collecting failed\n"
            else:
                status, body = b"404 Not Found", b"only GET /metrics\n"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; version=0.0.4; "
                         b"charset=utf-8\r\nContent-Length: " + str(len(body)).encode() +
                         b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            log.debug("metrics request failed: %r", e)
        finally:
            writer.close()
