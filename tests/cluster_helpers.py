"""Small helpers for tests that talk to an in-process Cluster over its real sockets.

Requests are kafka-python classes sent through minibroker's KafkaClientConnection; expected
responses are built with the same classes so tests compare whole responses (STYLE 11).
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any, Awaitable, Callable

from kafka.protocol.consumer import FetchRequest, FetchResponse, ListOffsetsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.default_records import DefaultRecordBatch

from minibroker.broker.broker import Broker
from minibroker.broker.faults import Faults
from minibroker.clock import Clock
from minibroker.cluster import Cluster
from minibroker.config import ClusterConfig
from minibroker.ids import IdSource
from minibroker.protocol.messages import LeaderAndIsrRequest
from minibroker.log.batch import build_batch
from minibroker.network.client import KafkaClientConnection, decode_response

PRODUCE_VERSION = 9
FETCH_VERSION = 12
LIST_OFFSETS_VERSION = 7

_PTopic = ProduceRequest.TopicProduceData
_PPart = _PTopic.PartitionProduceData
_RTopic = ProduceResponse.TopicProduceResponse
_RPart = _RTopic.PartitionProduceResponse
_FTopic = FetchRequest.FetchTopic
_FPart = _FTopic.FetchPartition
_LTopic = ListOffsetsRequest.ListOffsetsTopic
_LPart = _LTopic.ListOffsetsPartition
_LaiTopic = LeaderAndIsrRequest.LeaderAndIsrTopicState
_LaiPart = _LaiTopic.LeaderAndIsrPartitionState


def wire(resp: Any, version: int) -> Any:
    """`resp` as a client decodes it at `version`: encode, then decode (fields the version does
    not carry drop out), so an expected response compares equal to a received one."""
    flexible = resp.flexible_version_q(version) and resp.API_KEY != 18
    frame = memoryview((0).to_bytes(4, "big") + (b"\x00" if flexible else b"")
                       + resp.encode(version=version))
    cls = type(resp)
    return decode_response(cls[None] if getattr(cls, "_class_version", None) is not None
                           else cls, frame, version)


def batch(values: list[bytes], timestamp: int, key: bytes | None = None) -> bytes:
    """One v2 batch of `values` (all with `timestamp`), as a client would send it."""
    return bytes(build_batch([(key, v, []) for v in values], timestamp=timestamp))


def produce_request(topic: str, partition: int, records: bytes | None, acks: int = -1,
                    timeout_ms: int = 10_000) -> ProduceRequest:
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        _PTopic(name=topic, partition_data=[_PPart(index=partition, records=records)])])


async def produce_each(conn: KafkaClientConnection, topic: str, values: list[bytes],
                       timestamp: int, first_offset: int = 0) -> None:
    """Produce `values` to topic-0 one request each (acks=all): each is acknowledged at the next
    offset, from `first_offset`."""
    for i, v in enumerate(values):
        resp = await conn.request(produce_request(topic, 0, batch([v], timestamp)), PRODUCE_VERSION)
        assert resp == wire(produce_response(topic, 0, base_offset=first_offset + i,
                                             log_start_offset=0), PRODUCE_VERSION)


def produce_response(topic: str, partition: int, error_code: int = 0, base_offset: int = -1,
                     log_start_offset: int = -1, error_message: str | None = None
                     ) -> ProduceResponse:
    """The whole ProduceResponse for one partition."""
    return ProduceResponse(throttle_time_ms=0, responses=[_RTopic(name=topic, partition_responses=[
        _RPart(index=partition, error_code=error_code, base_offset=base_offset,
               log_append_time_ms=-1, log_start_offset=log_start_offset, record_errors=[],
               error_message=error_message)])])


def fetch_request(topic: str, partition: int, offset: int, max_wait_ms: int = 0,
                  min_bytes: int = 1, current_leader_epoch: int = -1,
                  max_bytes: int = 1 << 20) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[_FTopic(topic=topic, partitions=[_FPart(
            partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=max_bytes)])])


def list_offsets_request(topic: str, partition: int, timestamp: int) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[_LTopic(
        name=topic, partitions=[_LPart(partition_index=partition, current_leader_epoch=-1,
                                       timestamp=timestamp)])])


def records_of(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in a buffer of v2 batches."""
    out = []
    pos = 0
    view = memoryview(data)
    while pos + 12 <= len(view):
        size = 12 + int.from_bytes(view[pos + 8:pos + 12], "big", signed=True)
        if pos + size > len(view):
            break
        for r in DefaultRecordBatch(bytes(view[pos:pos + size])):
            out.append((r.offset, r.value))
        pos += size
    return out


def fetched_records(resp: FetchResponse) -> list[tuple[int, bytes | None]]:
    [t] = resp.responses
    [p] = t.partitions
    assert p.error_code == 0, p
    return records_of(bytes(p.records or b""))


def log_bytes(c: Cluster, broker_id: int, topic: str, partition: int) -> bytes:
    """Every stored batch of one replica, concatenated (to compare replicas byte for byte)."""
    p = c.brokers[broker_id].replica_manager.get(topic, partition)
    r = p.log.read(p.log.log_start_offset, 1 << 40, None)
    return b"".join(bytes(v) for v in r.records)


def log_records(c: Cluster, broker_id: int, topic: str, partition: int
                ) -> list[tuple[int, bytes | None]]:
    return records_of(log_bytes(c, broker_id, topic, partition))


async def connect(c: Cluster, broker_id: int, client_id: str = "test") -> KafkaClientConnection:
    b = c.brokers[broker_id]
    return await KafkaClientConnection.connect(b.host, b.port, client_id=client_id)


async def request_once(c: Cluster, broker_id: int, req: Any, version: int,
                       client_id: str = "test") -> Any:
    """`req` at `version` on a connection of its own to `broker_id`, closed after the answer."""
    conn = await connect(c, broker_id, client_id)
    try:
        return await conn.request(req, version)
    finally:
        conn.close()


async def find_coordinator(conn: KafkaClientConnection, key: str, key_type: int = 0) -> int:
    """FindCoordinator on `conn` every 50 ms until a node is named (returned); the first asks
    create the internal topic."""
    for _ in range(200):
        r = await conn.request(FindCoordinatorRequest(key=key, key_type=key_type), 3)
        if r.error_code == 0:
            return r.node_id
        await asyncio.sleep(0.05)
    raise AssertionError(f"no coordinator for {key!r}")


async def wait_until(cond: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    """Poll `cond` every 10 ms of loop time (virtual in tests) until it is truthy."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        if loop.time() >= end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or cond}")
        await asyncio.sleep(0.01)


async def until_partition(c: Cluster, topic: str, partition: int,
                          probe: Callable[[], Awaitable[Any]], timeout: float = 60.0) -> Any:
    """Await `probe()` every 10 ms of loop time until it returns something other than None
    (returned); past `timeout`, fail showing the controller's state of the partition."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while (v := await probe()) is None:
        assert loop.time() < end, await c.partition_state(topic, partition)
        await asyncio.sleep(0.01)
    return v


async def settle_partition_count(c: Cluster, topic: str, count: int) -> None:
    """Until every running broker's metadata shows `count` partitions with leaders."""
    for _ in range(500):
        ok = all(b.metadata.topics.get(topic) is not None
                 and len(b.metadata.topics[topic].partitions) == count
                 and all(p.leader >= 0 for p in b.metadata.topics[topic].partitions.values())
                 for b in c.brokers.values() if b.running)
        if ok:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{topic} did not settle at {count} partitions")


async def set_partition_count(c: Cluster, topic: str, count: int) -> None:
    """CreatePartitions to `count` through the controller (fewer: KIP-253), accepted, and then
    settled on every running broker."""
    assert (await c.controller.create_partitions(topic, count, None, False)).error_code == 0
    await settle_partition_count(c, topic, count)


async def wait_for_isr(c: Cluster, topic: str, partition: int, isr: set[int],
                       timeout: float = 120.0) -> dict:
    """Until the controller's ISR and every live replica's view of it equal `isr`."""
    async def ok():
        st = await c.partition_state(topic, partition)
        if set(st["isr"]) != isr:
            return None
        leader = c.brokers[st["leader"]].replica_manager.get(topic, partition)
        return st if leader is not None and set(leader.isr) == isr else None
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        st = await ok()
        if st is not None:
            return st
        if loop.time() >= end:
            raise AssertionError(f"ISR of {topic}-{partition} never became {sorted(isr)}: "
                                 f"{await c.partition_state(topic, partition)}")
        await asyncio.sleep(0.05)


# ---------------------------------------------------------------------- one broker, no sockets
async def memory_broker(faults: Faults | None = None) -> Broker:
    """Broker 1 alone, started without a listener: reach it with network.memory.connect(b.handle)."""
    b = Broker(1, ClusterConfig(), Clock(), IdSource(1), controller_channel=None,
               faults=faults or Faults())
    await b.start(listen=False)
    return b


def lead_request(topic: str, node_id: int) -> LeaderAndIsrRequest:
    """What the controller sends a broker that now leads topic-0 alone (RF 1)."""
    part = _LaiPart(partition_index=0, controller_epoch=1, leader=node_id, leader_epoch=0,
                    isr=[node_id], partition_epoch=0, replicas=[node_id], adding_replicas=[],
                    removing_replicas=[], is_new=True, leader_recovery_state=0)
    return LeaderAndIsrRequest(
        controller_id=100, is_k_raft_controller=False, controller_epoch=1, broker_epoch=0,
        request_type=0, live_leaders=[], topic_states=[_LaiTopic(
            topic_name=topic, topic_id=uuid.UUID(int=7), partition_states=[part],
            undeleted_partition_count=1, configs=[])])
