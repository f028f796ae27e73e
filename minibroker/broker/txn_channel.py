"""A broker's requests to other brokers for transactions, over their listeners (as Kafka's
TransactionMarkerChannelManager and AddPartitionsToTxnManager): WriteTxnMarkers from a transaction
coordinator to partition leaders, and AddPartitionsToTxn verify_only (KIP-890) from a partition
leader to a transactional id's coordinator. One connection per destination broker, reused."""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kafka.protocol.producer import AddPartitionsToTxnRequest, WriteTxnMarkersRequest

from minibroker.network.client import KafkaClientConnection
from minibroker.network.partitions import NetworkPartitions

if TYPE_CHECKING:
    from minibroker.metadata.cache import MetadataCache

log = logging.getLogger("minibroker.txn")

WRITE_TXN_MARKERS_VERSION = 1
VERIFY_VERSION = 4
REQUEST_TIMEOUT_S = 30.0
_Marker = WriteTxnMarkersRequest.WritableTxnMarker
_MarkerTopic = _Marker.WritableTxnMarkerTopic
_Txn = AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction
_TxnTopic = _Txn.AddPartitionsToTxnTopic


class TxnChannel:
    def __init__(self, node_id: int, metadata: "MetadataCache",
                 network: NetworkPartitions | None = None) -> None:
        self.node_id = node_id
        self.network = network if network is not None else NetworkPartitions()
        self.metadata = metadata
        self._conns: dict[int, KafkaClientConnection] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    async def _conn(self, broker_id: int) -> KafkaClientConnection:
        lock = self._locks.setdefault(broker_id, asyncio.Lock())
        async with lock:
            conn = self._conns.get(broker_id)
            if conn is None or conn.closed:
                info = self.metadata.brokers.get(broker_id)
                if info is None:
                    raise ConnectionError(f"broker {broker_id} unknown")
                conn = self._conns[broker_id] = await self.network.connect(
                    self.node_id, broker_id, info.host, info.port,
                    client_id=f"broker-{self.node_id}-txn")
            return conn

    async def _request(self, broker_id: int, req: Any, version: int) -> Any:
        conn = await self._conn(broker_id)
        try:
            return await conn.request(req, version, timeout=REQUEST_TIMEOUT_S)
        except Exception:
            conn.close("transaction request failed")
            raise

    async def send_markers(self, broker_id: int,
                           markers: list[tuple[int, int, bool, int, list[tuple[str, int]]]]
                           ) -> dict[tuple[int, str, int], int]:
        """markers: [(producer_id, epoch, commit, coordinator_epoch, [(topic, partition)])];
        returns {(producer_id, topic, partition): error code}."""
        req_markers = []
        for producer_id, epoch, commit, coordinator_epoch, tps in markers:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(partition)
            req_markers.append(_Marker(
                producer_id=producer_id, producer_epoch=epoch, transaction_result=commit,
                coordinator_epoch=coordinator_epoch, transaction_version=0,
                topics=[_MarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()]))
        resp = await self._request(broker_id, WriteTxnMarkersRequest(markers=req_markers),
                                   WRITE_TXN_MARKERS_VERSION)
        return {(m.producer_id, t.name, p.partition_index): p.error_code
                for m in resp.markers for t in m.topics for p in t.partitions}

    async def verify(self, broker_id: int, transactional_id: str, producer_id: int, epoch: int,
                     tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """AddPartitionsToTxn verify_only at the coordinator: {(topic, partition): error code}."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)
        req = AddPartitionsToTxnRequest(transactions=[_Txn(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
            verify_only=True, topics=[_TxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])
        resp = await self._request(broker_id, req, VERIFY_VERSION)
        if resp.error_code:
            return {tp: resp.error_code for tp in tps}
        return {(t.name, p.partition_index): p.partition_error_code
                for r in resp.results_by_transaction for t in r.topic_results
                for p in t.results_by_partition}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close("broker stopping")
        self._conns.clear()
